//! memray over a window of a training's steps (`options.schedule`), against a loop whose
//! allocations are known by construction: the buffer made and freed once a step is counted
//! exactly as many times as the window had steps, and the program is ended after it.

use super::*;
use system_profile_model::run::{AfterTrace, ArtifactKind, RunStatus, TorchSchedule};
use system_profile_runner::execute;

/// A long loop (the window must not wait for its end) whose own handler would swallow an
/// exception; line 8 makes a 3 MB buffer once a step and frees it at once.
const LONG_TRAIN: &str = r#"import torch
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
try:
    for step in range(100000):
        x = torch.randn(32, 64)
        loss = model(x).pow(2).mean()
        scratch = torch.ones(3_000_000, dtype=torch.uint8); del scratch
        opt.zero_grad()
        loss.backward()
        opt.step()
except BaseException:
    print("caught")
print("trained")
"#;

#[tokio::test]
async fn memray_tracks_a_window_of_steps_and_ends_the_program_after_it() {
    let py = python();
    if !module(&py, "torch") || !module(&py, "memray") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let train = script(dir.path(), "train.py", LONG_TRAIN);
    let mut i = input(Method::Memray, command(&[&py, &train]));
    i.options.schedule = Some(TorchSchedule {
        wait: 3,
        warmup: 1,
        active: 3,
        repeat: 1,
        after_trace: AfterTrace::EndProgram,
    });
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert_eq!(e.exit_code, Some(0), "{e:?}");
    assert!(
        !e.stdout_tail.contains("trained") && !e.stdout_tail.contains("caught"),
        "{:?}",
        e.stdout_tail
    );
    let w = e.metrics.step_window.as_ref().expect("the window");
    assert_eq!(
        (w.first_traced_step, w.last_traced_step, w.steps_seen),
        (5, 7, 7),
        "{w:?}"
    );
    assert!(!w.after_trace.is_run_on(), "{w:?}");
    assert!(
        e.warnings
            .iter()
            .any(|m| m.contains("tracked steps 5-7 only")),
        "{:?}",
        e.warnings
    );
    assert!(e
        .artifacts
        .iter()
        .any(|a| a.kind == ArtifactKind::MemrayBin));
    // Steps 5, 6 and 7 each made the buffer once: three of them (3,000,384 bytes each with
    // the tensor's header; memray merges the line's small allocations in), not one per step.
    let a = e.metrics.allocations.as_ref().expect("memray's figures");
    let scratch = a
        .short_lived_large
        .iter()
        .find(|s| s.file.ends_with("train.py") && s.line == Some(8))
        .unwrap_or_else(|| panic!("line 8 among {:?}", a.short_lived_large));
    assert!(
        (9_000_000..9_100_000).contains(&scratch.bytes),
        "{scratch:?}"
    );
    // What was live at the peak keeps the loop's frames (memray's Tracker entered inside the
    // loop hid them).
    assert!(
        a.at_peak
            .iter()
            .any(|s| s.file.ends_with("train.py") && s.line == Some(8)),
        "{:?}",
        a.at_peak
    );
}
