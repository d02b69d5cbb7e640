//! Each strategy on a file that tries everything a formatter would trip on (latin-1 with its
//! coding line, CRLF, tab indentation, a nested class, a decorated static method, a
//! multi-line string inside the body, `async def`, no final newline): the diff (reviewed as
//! a snapshot), the program still runs and logs, and a revert gives back every byte.

use crate::support::*;
use system_profile_instrument::{list_changes, revert_changes};
use system_profile_model::instrument::{
    InstrumentRecord as R, LineRange, ListChangesInput, Measure, RevertChangesInput, Strategy,
};

const TRICKY: &[u8] = include_bytes!("../data/tricky_latin1_crlf.py");

fn setup() -> Root {
    let root = Root::new(&[]);
    std::fs::write(root.file("tricky.py"), TRICKY).unwrap();
    root
}

/// The diff with the scratch root's path and the helper's long body left out.
fn shown(root: &Root, diff: &str) -> String {
    diff.replace(&root.path.to_string_lossy().to_string(), "<root>")
}

#[test]
fn every_strategy_keeps_encoding_line_endings_tabs_and_the_missing_newline() {
    let root = setup();
    let decorator = root.instrument(
        "tricky.py",
        Measure::Timing,
        Strategy::Decorator,
        "Au\u{df}en.Innen.schritt",
        None,
    );
    assert_eq!(decorator.change_ids, ["c0001", "c0002", "c0003"]);
    assert_eq!(
        decorator.changes[0].file,
        "profile_output/instrument/_sp_profile.py"
    );
    insta::assert_snapshot!("decorator_import", shown(&root, &decorator.changes[1].diff));
    insta::assert_snapshot!("decorator", shown(&root, &decorator.changes[2].diff));

    let mut ctx = input("tricky.py", Measure::Memory, Strategy::Context);
    ctx.function = Some("schritt".into());
    let context = root.with(ctx);
    assert_eq!(
        context.change_ids,
        ["c0004"],
        "the helper and the import are in place"
    );
    insta::assert_snapshot!(
        "context_with_a_string_that_must_not_move",
        shown(&root, &context.changes[0].diff)
    );

    let mut marks = input("tricky.py", Measure::Timing, Strategy::Inline);
    let start = root.line_of("tricky.py", "for i in range(3)");
    marks.lines = Some(LineRange {
        start,
        end: start + 1,
    });
    let inline = root.with(marks);
    insta::assert_snapshot!(
        "inline_at_the_end_of_the_file",
        shown(&root, &inline.changes[0].diff)
    );

    let runner = root.instrument(
        "tricky.py",
        Measure::Timing,
        Strategy::Runner,
        "main, hole",
        Some(1),
    );
    insta::assert_snapshot!("runner", shown(&root, &runner.changes[0].diff));

    let now = std::fs::read(root.file("tricky.py")).unwrap();
    assert!(
        now.windows(2).filter(|w| w == b"\r\n").count() >= 31,
        "CRLF kept"
    );
    assert!(
        !now.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r'),
        "no bare LF added"
    );
    assert!(!now.ends_with(b"\n"), "still no final newline");
    assert!(
        now.starts_with(b"#!/usr/bin/env python3\r\n# -*- coding: latin-1 -*-\r\n"),
        "the coding line stays on line 2"
    );

    // It runs, as itself and through the runner, and the same answer comes out.
    assert_eq!(root.run(&["tricky.py"]).trim(), "33 1");
    assert_eq!(root.run(&[&runner.run_command[1]]).trim(), "33 1");
    let recs = root.records();
    for id in ["c0003", "c0004", "c0005", "c0006"] {
        assert!(
            recs.iter()
                .any(|r| matches!(r, R::Summary(s) if s.change == id && s.calls > 0)),
            "{id} recorded nothing"
        );
    }

    let list = list_changes(&root.path, &ListChangesInput::default()).unwrap();
    insta::assert_snapshot!("part_b", list.markdown);

    let r = root.revert_all();
    assert!(r.complete, "{r:?}");
    assert_eq!(std::fs::read(root.file("tricky.py")).unwrap(), TRICKY);
    assert!(!root
        .path
        .join("profile_output/instrument/_sp_profile.py")
        .exists());
}

#[test]
fn undoing_one_change_keeps_the_others_exactly_revertible() {
    let root = setup();
    let a = root.instrument(
        "tricky.py",
        Measure::Timing,
        Strategy::Decorator,
        "main",
        None,
    );
    let b = root.instrument(
        "tricky.py",
        Measure::Timing,
        Strategy::Decorator,
        "hole",
        None,
    );
    let after_b = std::fs::read(root.file("tricky.py")).unwrap();
    // The older one alone: taken out three-way, the newer one stays and still runs.
    let r = revert_changes(
        &root.config(),
        &RevertChangesInput {
            all: false,
            ids: vec![a.change_ids[2].clone()],
            force: false,
        },
    )
    .unwrap();
    assert!(r.complete, "{r:?}");
    let now = String::from_utf8_lossy(&std::fs::read(root.file("tricky.py")).unwrap()).into_owned();
    assert!(
        !now.contains(&a.change_ids[2]) && now.contains(&b.change_ids[0]),
        "{now}"
    );
    assert_ne!(now.as_bytes(), after_b.as_slice());
    assert_eq!(root.run(&["tricky.py"]).trim(), "33 1");
    let list = list_changes(&root.path, &ListChangesInput::default()).unwrap();
    assert!(
        list.drifted.is_empty(),
        "the newer change was rebased: {list:?}"
    );
    // Then the rest, exactly.
    let r = root.revert_all();
    assert!(
        r.reverted
            .iter()
            .all(|c| c.outcome != system_profile_model::instrument::RevertOutcome::Merged),
        "{r:?}"
    );
    assert_eq!(std::fs::read(root.file("tricky.py")).unwrap(), TRICKY);
}
