//! compare on real sessions: cpu_hotspot.py before and after its fix, three repeats each.

use crate::support::Root;
use system_profile_model::report::{CompareInput, CompareSide, Lang};
use system_profile_report::ReportErrorKind;

fn side(session: &str, runs: &[&str]) -> CompareSide {
    CompareSide {
        session: session.into(),
        runs: runs.iter().map(|r| r.to_string()).collect(),
    }
}

#[test]
fn the_fix_is_larger_than_the_noise_of_three_repeats() {
    let root = Root::new();
    let before = root.install("cpu");
    let after = root.install("cpu-after");
    for lang in [Lang::En, Lang::Ja] {
        let out = system_profile_report::compare(
            &root.config(&after),
            &CompareInput {
                before: side(&before, &[]),
                after: side(&after, &[]),
                lang,
                ..CompareInput::default()
            },
        )
        .unwrap();
        let wall = out
            .deltas
            .iter()
            .find(|d| d.metric == "wall_s" && d.group.starts_with("measure "))
            .unwrap();
        assert_eq!((wall.repeats_before, wall.repeats_after), (3, 3));
        assert!(wall.before > 1.0 && wall.after < 0.1, "{wall:?}");
        assert!(wall.noise.unwrap() < 0.1, "{wall:?}");
        assert_eq!(wall.verdict, "larger_than_noise");
        // The fixed program's py-spy run saw 2 samples; the other methods ran only before.
        assert!(out.unmatched.iter().any(|u| u.starts_with("cprofile ")));
        let md = std::fs::read_to_string(root.path().join(&out.markdown_path)).unwrap();
        assert_eq!(md, out.markdown);
        assert!(root.path().join(&out.json_path).is_file());
        match lang {
            Lang::En => insta::assert_snapshot!("compare_cpu_fix_en", out.markdown),
            Lang::Ja => insta::assert_snapshot!("compare_cpu_fix_ja", out.markdown),
        }
    }
}

#[test]
fn repeats_of_one_program_are_within_noise_and_single_runs_unknown() {
    let root = Root::new();
    let s = root.install("cpu");
    let config = root.config(&s);
    let out = system_profile_report::compare(
        &config,
        &CompareInput {
            before: side(&s, &["r001-measure", "r002-measure"]),
            after: side(&s, &["r003-measure"]),
            ..CompareInput::default()
        },
    )
    .unwrap();
    let wall = out.deltas.iter().find(|d| d.metric == "wall_s").unwrap();
    assert_eq!((wall.repeats_before, wall.repeats_after), (2, 1));
    assert_eq!(wall.verdict, "within_noise", "{wall:?}");
    let out = system_profile_report::compare(
        &config,
        &CompareInput {
            before: side(&s, &["r001-measure"]),
            after: side(&s, &["r003-measure"]),
            ..CompareInput::default()
        },
    )
    .unwrap();
    assert!(out
        .deltas
        .iter()
        .all(|d| d.verdict == "unknown" && d.noise.is_none()));
    assert!(out.markdown.contains("one run a side: repeat it"));
}

#[test]
fn nothing_in_common_is_an_error_that_says_so() {
    let root = Root::new();
    let cpu = root.install("cpu");
    let io = root.install("io");
    let err = system_profile_report::compare(
        &root.config(&io),
        &CompareInput {
            before: side(&cpu, &["r004-py-spy-record"]),
            after: side(&io, &["r001-measure"]),
            ..CompareInput::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ReportErrorKind::NoData);
    assert!(err.to_string().contains("matches"), "{err}");
    let err = system_profile_report::compare(
        &root.config(&io),
        &CompareInput {
            before: side("../x", &[]),
            after: side(&io, &[]),
            ..CompareInput::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        err.kind(),
        ReportErrorKind::InvalidInput {
            field: "before.session"
        }
    );
}

/// A measure run watched by py-spy (paused for each sample) and one that was not are not the
/// same measurement: compare matches neither with the other.
#[test]
fn a_run_under_observers_is_never_compared_with_one_without() {
    let root = Root::new();
    let s = root.install("cpu");
    let manifest = root
        .path()
        .join("profile_output")
        .join(&s)
        .join("manifest.json");
    let mut list: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    for run in list["runs"].as_array_mut().unwrap() {
        if run["run_id"] == "r003-measure" {
            run["observers"] = serde_json::json!(["py_spy_record"]);
        }
    }
    std::fs::write(&manifest, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
    let err = system_profile_report::compare(
        &root.config(&s),
        &CompareInput {
            before: side(&s, &["r001-measure", "r002-measure"]),
            after: side(&s, &["r003-measure"]),
            ..CompareInput::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ReportErrorKind::NoData);
    let text = err.to_string();
    assert!(
        text.contains("by method, observers and target") && text.contains("measure+py_spy_record "),
        "{text}"
    );
}
