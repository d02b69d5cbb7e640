//! pyinstrument's and Scalene's runs (their real outputs on pyperformance's richards, read by
//! the parsers) reach the hotspot table beside each other, each citing its own artifact and
//! saying its own seconds.

use super::support::*;
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::{Artifact, Method, RunList, RunMetrics};

fn in_process_session(root: &Root, name: &str) -> String {
    let dir = root.path().join("profile_output").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let stacks = system_profile_parse::pyinstrument_session::parse(
        &std::fs::read_to_string(parse_fixture("pyinstrument_session/richards.txt")).unwrap(),
    )
    .value;
    // The runner gives pyinstrument the script's absolute path (the fixture was taken with a
    // relative one in /tmp/pyi, where Scalene's was taken).
    let mut stacks = stacks;
    for f in stacks.by_self.iter_mut().chain(stacks.by_total.iter_mut()) {
        if f.file.as_deref() == Some("richards.py") {
            f.file = Some("/tmp/pyi/richards.py".into());
        }
    }
    let pyinstrument = record(
        "r001-pyinstrument",
        Method::Pyinstrument,
        RunMetrics {
            stacks: Some(stacks),
            ..RunMetrics::default()
        },
        vec![Artifact {
            path: format!("profile_output/{name}/r001-pyinstrument/pyinstrument.folded"),
            kind: ArtifactKind::Folded,
            bytes: 0,
        }],
    );
    let usage = system_profile_parse::scalene_json::parse(
        &std::fs::read_to_string(parse_fixture("scalene_json/richards-memory.txt")).unwrap(),
    )
    .value;
    let scalene = record(
        "r002-scalene",
        Method::Scalene,
        RunMetrics {
            stacks: Some(system_profile_parse::scalene_json::stacks(&usage)),
            allocations: system_profile_parse::scalene_json::allocations(&usage),
            line_usage: Some(usage),
            ..RunMetrics::default()
        },
        vec![Artifact {
            path: format!("profile_output/{name}/r002-scalene/scalene.json"),
            kind: ArtifactKind::ScaleneJson,
            bytes: 0,
        }],
    );
    let list = RunList {
        session: name.into(),
        dir: format!("profile_output/{name}"),
        logical_cpus: None,
        runs: vec![pyinstrument, scalene],
        not_run: Vec::new(),
    };
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&list).unwrap(),
    )
    .unwrap();
    name.to_string()
}

#[test]
fn both_reach_the_hotspots_citing_their_own_files() {
    let root = Root::new();
    let session = in_process_session(&root, "in-process");
    let report = root.report(&session);
    let table = report.hotspots.expect("a hotspot table");
    let run_task = table
        .rows
        .iter()
        .find(|h| h.function.ends_with("runTask"))
        .expect("runTask");
    let tools: Vec<&str> = run_task.evidence.iter().map(|e| e.tool.as_str()).collect();
    assert!(
        tools.contains(&"pyinstrument") && tools.contains(&"scalene"),
        "{tools:?}"
    );
    for e in &run_task.evidence {
        let cited = e.source.artifact.as_deref().unwrap_or_default();
        let own = if e.tool == "scalene" {
            "scalene.json"
        } else {
            "pyinstrument.folded"
        };
        assert!(cited.ends_with(own), "{} cites {cited:?}", e.tool);
        // Seconds from each method's own sample period, not from its argv (empty here).
        let s = e.self_s.expect("own seconds");
        assert!(s > 0.0 && s < 10.0, "{}: {s}", e.tool);
    }
    // Scalene's only allocation on richards is one ~1 MB sample at richards.py:12 (`import
    // pyperf`): one sample landing on a line, not a site, so the report names none (the 64 MiB
    // line of the runner's test is one), and the line view still holds it.
    assert!(
        report.allocation_sites.iter().all(|s| s.tool != "scalene"),
        "{:?}",
        report.allocation_sites
    );
    let usage = system_profile_parse::scalene_json::parse(
        &std::fs::read_to_string(parse_fixture("scalene_json/richards-memory.txt")).unwrap(),
    )
    .value;
    assert!(usage
        .lines
        .iter()
        .any(|l| l.line == 12 && l.malloc_bytes > 0));
}
