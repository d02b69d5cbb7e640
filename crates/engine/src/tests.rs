//! The engine's own tests: bounds, caching, identified targets, bad inputs.

use super::*;

/// A `sleep 30` started through a shell that exits, so it is not this test's child (the
/// identification leaves its own process tree out); its PID.
fn sleeper() -> i32 {
    let out = std::process::Command::new("sh")
        .args(["-c", "sleep 30 >/dev/null 2>&1 & echo $!"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A number outside its schema's bounds is refused before anything runs, naming its field
/// (nested ones by their path), whichever tool it reaches.
#[tokio::test]
async fn numbers_outside_their_schema_bounds_are_refused_by_field() {
    let root = tempfile::tempdir().unwrap();
    let engine = Engine::new(EngineConfig {
        root: root.path().to_path_buf(),
        ..Default::default()
    });
    let field_of = |e: EngineError| match e {
        EngineError::InvalidInput { field, message } => {
            assert!(message.contains("out of range"), "{message}");
            field
        }
        other => panic!("{other}"),
    };
    let err = engine
        .detect_tools(
            DetectToolsInput {
                probe_timeout_s: Some(500.0),
                ..Default::default()
            },
            &Progress::none(),
        )
        .await
        .unwrap_err();
    assert_eq!(field_of(err), "probe_timeout_s");
    let mut run: RunProfilerInput = serde_json::from_value(serde_json::json!({
        "profiler": "procfs_sampler", "target": {"pid": 1}, "duration_s": 0.01
    }))
    .unwrap();
    let err = engine
        .run_profiler(run.clone(), &Progress::none())
        .await
        .unwrap_err();
    assert_eq!(field_of(err), "duration_s");
    run.duration_s = Some(1.0);
    run.options.interval_s = Some(0.0);
    let err = engine
        .run_profiler(run, &Progress::none())
        .await
        .unwrap_err();
    assert_eq!(field_of(err), "options.interval_s");
    assert!(engine.runs.list().runs.is_empty(), "nothing was started");
}

#[tokio::test]
async fn second_call_is_cached_and_refresh_probes_again() {
    let engine = Engine::new(EngineConfig::default());
    let first = engine
        .detect_tools(DetectToolsInput::default(), &Progress::none())
        .await
        .unwrap();
    assert!(!first.cached);
    let second = engine
        .detect_tools(DetectToolsInput::default(), &Progress::none())
        .await
        .unwrap();
    assert!(second.cached);
    assert_eq!(first.detected_at_unix_s, second.detected_at_unix_s);
    let third = engine
        .detect_tools(
            DetectToolsInput {
                refresh: true,
                ..Default::default()
            },
            &Progress::none(),
        )
        .await
        .unwrap();
    assert!(!third.cached);
    assert!(third.detected_at_unix_s > first.detected_at_unix_s);
}

#[tokio::test]
async fn a_probing_call_reports_every_part_and_a_cached_one_reports_none() {
    let engine = Engine::new(EngineConfig::default());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let progress = Progress::to(move |u| sink.lock().unwrap().push(u));
    engine
        .detect_tools(DetectToolsInput::default(), &progress)
        .await
        .unwrap();
    let updates = seen.lock().unwrap().clone();
    assert_eq!(updates.len(), DETECT_PARTS.len() + 1, "{updates:?}");
    let steps: Vec<f64> = updates.iter().map(|u| u.progress).collect();
    assert_eq!(steps, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert!(updates.iter().all(|u| u.total == Some(6.0)));
    let mut parts: Vec<&str> = updates[1..]
        .iter()
        .map(|u| u.message.trim_end_matches(" done"))
        .collect();
    parts.sort_unstable();
    let mut expected = DETECT_PARTS.to_vec();
    expected.sort_unstable();
    assert_eq!(parts, expected);

    seen.lock().unwrap().clear();
    let cached = engine
        .detect_tools(DetectToolsInput::default(), &progress)
        .await
        .unwrap();
    assert!(cached.cached);
    assert!(seen.lock().unwrap().is_empty());
}

/// run_profiler takes the `target_id` identify_target returned: a script runs as its
/// command in its folder, a process is attached by its PID, and the record keeps what ran.
#[tokio::test]
async fn run_profiler_takes_an_identified_target() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("hello.py"),
        "print('hello from the target')\n",
    )
    .unwrap();
    let engine = Engine::new(EngineConfig {
        root: root.path().to_path_buf(),
        ..Default::default()
    });
    let target = engine
        .identify_target(IdentifyTargetInput {
            arguments: "hello.py".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!target.needs_clarification, "{:?}", target.questions);
    let id = target.target_id.clone().unwrap();
    let input: RunProfilerInput = serde_json::from_value(serde_json::json!({
        "profiler": "custom", "target": {"target_id": id}
    }))
    .unwrap();
    let record = engine.run_profiler(input, &Progress::none()).await.unwrap();
    assert_eq!(record.status, RunStatus::Completed, "{record:?}");
    assert!(record.stdout_tail.contains("hello from the target"));
    let RunTarget::Command { command, .. } = &record.target else {
        panic!("{:?}", record.target)
    };
    assert!(command[1].ends_with("hello.py"), "{command:?}");

    let pid = sleeper() as u32;
    let target = engine
        .identify_target(IdentifyTargetInput {
            arguments: format!("pid {pid}"),
            ..Default::default()
        })
        .await
        .unwrap();
    let input: RunProfilerInput = serde_json::from_value(serde_json::json!({
        "profiler": "procfs_sampler", "duration_s": 0.5,
        "target": {"target_id": target.target_id.unwrap()}
    }))
    .unwrap();
    let record = engine.run_profiler(input, &Progress::none()).await.unwrap();
    // SAFETY: kill has no memory preconditions; the PID is the sleeper started above.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert_eq!(record.target, RunTarget::Pid { pid });
    let unknown: RunProfilerInput = serde_json::from_value(serde_json::json!({
        "profiler": "custom", "target": {"target_id": "t999"}
    }))
    .unwrap();
    let err = engine
        .run_profiler(unknown, &Progress::none())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("t999"), "{err}");
}

#[tokio::test]
async fn a_target_whose_process_exited_is_identified_again() {
    let engine = Engine::new(EngineConfig::default());
    let pid = sleeper();
    let target = engine
        .identify_target(IdentifyTargetInput {
            arguments: format!("pid {pid}"),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!target.needs_clarification, "{:?}", target.questions);
    // SAFETY: kill has no memory preconditions; the PID is the sleeper started above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    for _ in 0..100 {
        if !system_profile_sample::proc::exists(pid as u32) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let plan = engine
        .plan_profile(
            PlanProfileInput {
                target_id: None,
                target: Some(TargetSpec::Identified(Box::new(target))),
                focus: Vec::new(),
                time_budget_s: None,
                cwd: None,
                python: None,
                lang: Default::default(),
            },
            &Progress::none(),
        )
        .await
        .unwrap();
    assert!(plan.notes[0].contains("re-identified"), "{:?}", plan.notes);
    assert!(plan.needs_clarification);
    assert!(
        plan.questions[0].contains(&format!("No process {pid}")),
        "{:?}",
        plan.questions
    );
    assert!(plan.steps.is_empty());
}

#[tokio::test]
async fn bad_inputs_name_the_field() {
    let engine = Engine::new(EngineConfig::default());
    let err = engine
        .detect_tools(
            DetectToolsInput {
                probe_timeout_s: Some(-1.0),
                ..Default::default()
            },
            &Progress::none(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("probe_timeout_s"));
    let err = engine
        .detect_tools(
            DetectToolsInput {
                python: Some("  ".into()),
                ..Default::default()
            },
            &Progress::none(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("python"));
    // Observers the run cannot have are refused before anything starts, with the field.
    let dir = tempfile::tempdir().unwrap();
    for (profiler, observer, says) in [
        ("py_spy_record", "perf_stat", "read by measure"),
        ("measure", "memray", "memray cannot observe"),
    ] {
        let input: RunProfilerInput = serde_json::from_value(serde_json::json!({
            "profiler": profiler, "options": {"observers": [observer]},
            "target": {"command": ["true"]}, "cwd": dir.path()
        }))
        .unwrap();
        match engine.run_profiler(input, &Progress::none()).await {
            Err(EngineError::InvalidInput { field, message }) => {
                assert_eq!(field, "options.observers");
                assert!(message.contains(says), "{message}");
            }
            other => panic!("expected options.observers refused, came {other:?}"),
        }
    }
}
