//! Missing data: a table left out says why in one line; nothing at all is a clear error; bad
//! names are refused naming the field.

use crate::support::Root;
use system_profile_model::report::{Lang, SummarizeInput};
use system_profile_report::ReportErrorKind;

#[test]
fn a_table_without_data_is_left_out_with_one_line() {
    let root = Root::new();
    let s = root.install("cpu-after");
    let out = root.summarize(&s, Lang::En);
    let r = &out.report;
    assert!(!r.cpu.is_empty());
    for table in ["interconnect", "gpu"] {
        let o = r.omitted.iter().find(|o| o.table == table).unwrap();
        assert!(!o.reason.contains('\n'));
        assert!(out.markdown.contains(&format!("_{}_", o.reason)), "{table}");
    }
    assert!(r.interconnect.is_none() && r.gpu.is_empty());
    assert!(out.markdown.contains("Left out: no GPU was measured"));
    let ja = root.summarize(&s, Lang::Ja);
    assert!(
        ja.markdown.contains("省略: GPU を測っていない"),
        "{}",
        ja.markdown
    );
}

#[test]
fn a_session_with_nothing_is_a_clear_error() {
    let root = Root::new();
    let dir = root.path().join("profile_output/20261202-000000-1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        r#"{"session":"20261202-000000-1","dir":"profile_output/20261202-000000-1","runs":[]}"#,
    )
    .unwrap();
    let err = system_profile_report::summarize(
        &root.config("20261202-000000-1"),
        &SummarizeInput::default(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ReportErrorKind::NoData);
    assert!(err.to_string().contains("nothing to report yet"), "{err}");
    assert!(err.to_string().contains("run_profiler"), "{err}");
    assert!(!dir.join("report.md").exists() && !dir.join("report.json").exists());
}

#[test]
fn unknown_sessions_and_runs_say_what_exists() {
    let root = Root::new();
    let s = root.install("io");
    let config = root.config(&s);
    let err = system_profile_report::summarize(
        &config,
        &SummarizeInput {
            session: Some("20990101-000000-9".into()),
            ..SummarizeInput::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ReportErrorKind::NoData);
    assert!(
        err.to_string().contains(&s),
        "names the sessions there: {err}"
    );
    for bad in ["../etc", "a/b", ".hidden", ""] {
        let err = system_profile_report::summarize(
            &config,
            &SummarizeInput {
                session: Some(bad.into()),
                ..SummarizeInput::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            err.kind(),
            ReportErrorKind::InvalidInput { field: "session" },
            "{bad}"
        );
    }
    let err = system_profile_report::summarize(
        &config,
        &SummarizeInput {
            runs: vec!["r009-nothing".into()],
            ..SummarizeInput::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ReportErrorKind::InvalidInput { field: "runs" });
    assert!(err.to_string().contains("r001-measure"), "{err}");
}

#[test]
fn chosen_runs_only() {
    let root = Root::new();
    let s = root.install("cpu");
    let out = system_profile_report::summarize(
        &root.config(&s),
        &SummarizeInput {
            runs: vec!["r004-py-spy-record".into()],
            ..SummarizeInput::default()
        },
    )
    .unwrap();
    assert_eq!(out.report.runs.len(), 1);
    assert!(out.report.cpu.is_empty());
    assert!(out.report.hotspots.is_some());
}

#[test]
fn a_corrupt_manifest_is_reported_not_guessed() {
    let root = Root::new();
    let dir = root.path().join("profile_output/20261202-000000-2");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        "{\"session\": \"x\", \"runs\": [",
    )
    .unwrap();
    let err = system_profile_report::summarize(
        &root.config("20261202-000000-2"),
        &SummarizeInput::default(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ReportErrorKind::Io);
    assert!(err.to_string().contains("not a manifest"), "{err}");
}
