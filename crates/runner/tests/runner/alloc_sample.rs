//! The allocation sampler against a program whose allocations are known by construction: the
//! sites' estimates within sampling error of the exact figures, the totals exact, a forked
//! child left alone, the program's exit status kept.

use super::*;
use system_profile_model::run::{ArtifactKind, RunStatus};
use system_profile_runner::execute;

/// Line 5 makes and drops a million short strings (about 55 MB a round, 10 rounds: the most
/// bytes over the run, none at the peak); line 8 holds 1.5 M `bytes(100)` objects (133 bytes
/// each, `sys.getsizeof`) and the list of them (8 bytes a slot) until the program ends: the
/// peak. A child forked at the end allocates in the parent's image and exits.
const KNOWN: &str = r#"import os, sys

def churn():
    for _ in range(10):
        xs = [str(i) * 3 for i in range(1_000_000)]

def hold():
    return [bytes(100) for _ in range(1_500_000)]

churn()
kept = hold()
pid = os.fork()
if pid == 0:
    junk = [bytes(100) for _ in range(200_000)]
    os._exit(0)
os.waitpid(pid, 0)
print(len(kept), sys.getsizeof(kept[0]))
sys.exit(3)
"#;

#[tokio::test]
async fn the_sampler_estimates_the_peak_and_the_churn_at_their_lines_and_counts_every_allocation() {
    let py = python();
    let dir = tempfile::tempdir().unwrap();
    let known = dir.path().join("known.py");
    std::fs::write(&known, KNOWN).unwrap();
    let e = execute(
        &input(
            Method::AllocSample,
            command(&[&py, &known.to_string_lossy()]),
        ),
        &place(dir.path()),
    )
    .await
    .unwrap();
    // The program's own status, through the runner.
    assert_eq!(e.exit_code, Some(3), "{e:?}");
    assert!(
        e.artifacts
            .iter()
            .any(|a| a.kind == ArtifactKind::AllocSamples),
        "{:?}",
        e.artifacts
    );
    let m = e
        .metrics
        .allocations
        .as_ref()
        .expect("the sampler's profile");
    assert!(m.sampled_every_bytes.is_some() && m.traces_python_allocators);
    // Held at the peak: 1.5 M objects of 133 bytes and the list's 12 MB; about 900 samples
    // at 256 KiB, so 15% is about 4.5 standard deviations.
    let held = 1_500_000.0 * 133.0 + 1_500_000.0 * 8.0;
    let peak = m
        .at_peak
        .iter()
        .find(|s| s.file.ends_with("known.py"))
        .expect("a site in the program");
    assert_eq!(peak.line, Some(8), "{:?}", m.at_peak);
    assert!(
        (peak.live_bytes as f64 - held).abs() < held * 0.15,
        "{} against {held}",
        peak.live_bytes
    );
    // Over the run: the churn line made the most, and nothing of it is held at the peak.
    let first = &m.top_by_size[0];
    assert!(
        first.file.ends_with("known.py") && first.line == Some(5),
        "{:?}",
        m.top_by_size
    );
    assert!(!m
        .at_peak
        .iter()
        .any(|s| s.line == Some(5) && s.live_bytes as f64 > held * 0.05));
    // Every allocation counted: at least the 10 M `str(i)`, their 10 M repeats and the 1.5 M
    // `bytes` objects (the loops' ints and the lists' growth come on top; the child's are its
    // own), and at least their bytes (50 bytes the smallest such str, 133 a `bytes(100)`).
    assert!(m.total_allocations >= 21_500_000, "{}", m.total_allocations);
    assert!(
        m.total_bytes_allocated >= 20_000_000 * 50 + 1_500_000 * 133,
        "{}",
        m.total_bytes_allocated
    );
    assert!(
        e.warnings.iter().all(|w| !w.contains("records end")),
        "{:?}",
        e.warnings
    );
    assert_eq!(e.status, RunStatus::Failed, "exit 3 is a failed run: {e:?}");
}
