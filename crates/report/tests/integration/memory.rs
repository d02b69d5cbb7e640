//! The memory session (memory_hog.py instrumented, then measure, tracemalloc and memray):
//! instrumentation figures split by the run whose processes wrote them, checked against the
//! log read independently here; the baseline at start against the runs' own figures.

use crate::support::{data, Root};
use std::collections::BTreeMap;
use system_profile_model::report::Lang;

/// The largest `rss_bytes` of the memory marks of each run, read straight from the log.
fn marks_by_run() -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(data("sessions/memory/instrument.jsonl")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["kind"] == "memory" {
            let run = v["run"]
                .as_str()
                .expect("every line names its run")
                .to_string();
            let rss = v["rss_bytes"].as_u64().unwrap();
            let e = out.entry(run).or_insert(0);
            *e = rss.max(*e);
        }
    }
    out
}

#[test]
fn instrumentation_figures_are_split_by_the_run_that_wrote_them() {
    let root = Root::new();
    let s = root.install("memory");
    let report = root.report(&s);
    let truth = marks_by_run();
    assert_eq!(
        truth.len(),
        3,
        "the three runs each loaded the helper: {truth:?}"
    );
    for (run, rss) in &truth {
        let label = format!("{run} (instrument)");
        let row = report
            .memory
            .iter()
            .find(|r| r.run_id == label)
            .unwrap_or_else(|| panic!("no row {label}: {:#?}", report.memory));
        assert_eq!(row.rss_peak_bytes, Some(*rss), "{label}");
        assert_eq!(row.sources[0].run_id, *run);
        let marks: Vec<_> = report
            .memory_marks
            .iter()
            .filter(|m| &m.run_id == run)
            .collect();
        assert_eq!(marks.len(), 2, "enter and exit of main in {run}");
        assert_eq!(marks.iter().map(|m| m.rss_bytes).max(), Some(*rss));
    }
    // Under tracemalloc the same program holds more: a mixed log would have shown that figure
    // as the instrumented run's.
    assert!(
        truth["r002-tracemalloc"] > truth["r001-measure"],
        "{truth:?}"
    );
}

#[test]
fn the_baseline_at_start_is_the_interpreter_and_the_imports() {
    let root = Root::new();
    let s = root.install("memory");
    let out = root.summarize(&s, Lang::En);
    let b = out.report.memory_baseline.as_ref().expect("a baseline");
    assert_eq!(b.source.run_id, "r002-tracemalloc");
    // memory_hog.py imports torch (in a try) and time before its code: torch is the weight.
    assert_eq!(b.imports[0].module, "torch");
    assert!(b.imports[0].rss_added_bytes > 100 << 20, "{b:?}");
    assert!(b.imports.iter().any(|i| i.module == "time"));
    assert!(b.interpreter_rss_bytes < 64 << 20, "{b:?}");
    let sum: u64 = b.imports.iter().map(|i| i.rss_added_bytes).sum();
    assert_eq!(b.interpreter_rss_bytes + sum, b.after_imports_rss_bytes);
    // The peak is the measure run's program process, the largest of `time` and python.
    let measure = out
        .report
        .memory
        .iter()
        .find(|r| r.run_id == "r001-measure")
        .unwrap();
    assert_eq!(b.peak_source.as_ref().unwrap().run_id, "r001-measure");
    assert_eq!(b.peak_rss_bytes, measure.largest_process_rss_peak_bytes);
    let peak = b.peak_rss_bytes.unwrap();
    assert_eq!(
        b.program_added_bytes,
        Some(peak - b.after_imports_rss_bytes)
    );
    // The program's own data (60 MiB of records, two 32 MiB tensors) is most of what it adds.
    let added = b.program_added_bytes.unwrap();
    assert!(added > 100 << 20 && added < 200 << 20, "{b:?}");
    assert!(
        out.markdown
            .contains("was held before the program's own code ran"),
        "the summary says so"
    );
    assert!(out.markdown.contains("| `torch` |"));
}
