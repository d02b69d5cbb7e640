//! The corpus round trip on a sample of the standard library of the Python that runs the
//! tests (every 25th file, about 75): every change compiles, every revert gives back the exact
//! bytes and permissions. The whole library is `examples/roundtrip.rs` (BENCHMARKS.md).

use crate::support;

#[test]
fn stdlib_sample_round_trips_byte_for_byte() {
    let python = std::env::var("SP_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let corpus = support::roundtrip::stdlib(&python);
    let mut files = Vec::new();
    support::roundtrip::python_files(&corpus, &mut files);
    assert!(
        files.len() > 500,
        "{} holds only {} files",
        corpus.display(),
        files.len()
    );
    let sample: Vec<_> = files.into_iter().step_by(25).collect();
    let t = support::roundtrip::run(&sample, &python, 2);
    assert!(
        t.failures.is_empty(),
        "failures:\n{}",
        t.failures.join("\n")
    );
    assert_eq!(t.different, 0);
    assert_eq!(
        t.identical + t.unparsable + t.not_compiling + t.no_functions,
        t.files
    );
    // Most files have functions, and each strategy was used on most of them.
    assert!(t.identical * 10 >= t.files * 8, "{t:?}");
    for strategy in [
        "decorator",
        "context",
        "runner",
        "context_lines",
        "inline_custom",
    ] {
        assert!(
            t.applied.get(strategy).copied().unwrap_or(0) * 10 >= t.identical * 9,
            "{strategy}: {t:?}"
        );
    }
    assert!(t.applied.get("inline").copied().unwrap_or(0) > 0, "{t:?}");
    assert_eq!(t.stacked_compiled, t.identical, "{t:?}");
}
