//! The report's Markdown and JSON on each real session, in English and Japanese. Review every
//! change of these snapshots: they are what a user reads.

use crate::support::{gpu_session, Nccl, Root};
use system_profile_model::report::Lang;

fn schema() -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../../schemas/report.json")).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// Summarize in both languages; check the files, the schema and the charts; snapshot both.
fn check(root: &Root, session: &str, name: &str) {
    for (lang, tag) in [(Lang::En, "en"), (Lang::Ja, "ja")] {
        let out = root.summarize(session, lang);
        let md = std::fs::read_to_string(root.path().join(&out.markdown_path)).unwrap();
        assert_eq!(md, out.markdown, "report.md is the Markdown returned");
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.path().join(&out.json_path)).unwrap())
                .unwrap();
        if let Err(e) = schema().validate(&json) {
            panic!("{name} {tag}: report.json does not match schemas/report.json: {e}");
        }
        for chart in &out.report.charts {
            let svg = std::fs::read_to_string(root.path().join(&chart.path)).unwrap();
            assert!(
                svg.starts_with("<svg") && svg.contains("<polyline"),
                "{}",
                chart.path
            );
            assert!(md.contains(&format!("charts/{}-{}.svg", chart.run_id, chart.kind)));
        }
        insta::assert_snapshot!(format!("{name}_{tag}_md"), out.markdown);
        insta::assert_json_snapshot!(format!("{name}_{tag}_json"), out.report);
    }
}

#[test]
fn cpu_session_from_real_runs() {
    let root = Root::new();
    let s = root.install("cpu");
    check(&root, &s, "cpu");
}

#[test]
fn memory_session_with_instrumentation() {
    let root = Root::new();
    let s = root.install("memory");
    check(&root, &s, "memory");
}

#[test]
fn waiting_session_with_strace() {
    let root = Root::new();
    let s = root.install("io");
    check(&root, &s, "io");
}

#[test]
fn gpu_session_from_gpu_tool_outputs() {
    let root = Root::new();
    let s = gpu_session(&root, "20261202-gpu-fixtures", Nccl::A100Pcie);
    check(&root, &s, "gpu");
}
