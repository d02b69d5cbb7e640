//! The allocation sampler's records of a real program (json.tool re-indenting 3.8 MB), whose
//! exact figures were taken by the same hooks writing every allocation (the fixture's source
//! note): the estimates within sampling error of them, the totals exact.

use super::{data_dir, fixture};
use system_profile_parse::alloc_samples;

/// json.tool is the standard library's: none of its frames, nor the runner's, is the
/// program's own, so each site stays at its innermost frame.
fn no_own_code(_file: &str) -> bool {
    false
}

#[test]
fn estimates_from_samples_come_within_sampling_error_of_the_exact_counts() {
    assert!(data_dir("alloc_samples")
        .join("json-tool-3.8mb.source.md")
        .exists());
    let parsed = alloc_samples::parse(
        fixture("alloc_samples", "json-tool-3.8mb").as_bytes(),
        no_own_code,
    );
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    insta::assert_json_snapshot!("alloc_samples_json_tool", parsed.value.profile);
    let p = &parsed.value.profile;
    // The totals are counted, not estimated.
    assert_eq!(
        (p.total_allocations, p.total_bytes_allocated),
        (1_566_712, 189_427_121)
    );
    assert_eq!(p.sampled_every_bytes, Some(262_144));
    // Bytes made, by the innermost frame, against every allocation written.
    let made = |function: &str| {
        p.top_by_size
            .iter()
            .find(|t| t.function == function)
            .and_then(|t| t.size_bytes)
            .unwrap_or(0) as f64
    };
    for (function, exact) in [
        ("dump", 62_685_881.0),
        ("JSONDecoder.raw_decode", 34_790_033.0),
    ] {
        let estimate = made(function);
        assert!(
            (estimate - exact).abs() < 0.15 * exact,
            "{function}: {estimate} against {exact}"
        );
    }
    assert_eq!(p.top_by_size[0].function, "dump");
    // The peak is the loaded document, held by the decoder's line.
    assert_eq!(p.at_peak[0].function, "JSONDecoder.raw_decode");
    assert!(p.at_peak[0].live_bytes > 10_000_000, "{:?}", p.at_peak[0]);
    // The process's own peak resident set, for the share the sampler saw.
    assert_eq!(parsed.value.max_rss_bytes, Some(38_032 * 1024));
}

#[test]
fn records_cut_short_keep_what_was_written_and_say_so() {
    let text = fixture("alloc_samples", "json-tool-3.8mb");
    let cut = &text[..text.find("\nT ").unwrap()];
    let parsed = alloc_samples::parse(cut.as_bytes(), no_own_code);
    assert!(
        parsed
            .diagnostics
            .iter()
            .any(|d| d.message.contains("end before the sampler's totals")),
        "{:?}",
        parsed.diagnostics
    );
    // Without the counted totals they are estimated from the samples.
    let p = &parsed.value.profile;
    let exact = 189_427_121.0;
    assert!(
        (p.total_bytes_allocated as f64 - exact).abs() < 0.1 * exact,
        "{}",
        p.total_bytes_allocated
    );
    assert!(!p.at_peak.is_empty());
    let not_ours = alloc_samples::parse("A 1 ff 10\n".as_bytes(), no_own_code);
    assert!(not_ours.value.profile.sampled_every_bytes.is_none());
    assert!(not_ours
        .diagnostics
        .iter()
        .any(|d| d.message.contains("not the allocation sampler's records")));
}
