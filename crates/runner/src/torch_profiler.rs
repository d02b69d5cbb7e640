//! `torch_profiler`: the target inside `torch.profiler.profile`, its Kineto trace analysed.

use super::*;

/// Runs the target inside `torch.profiler.profile` (CPU, and CUDA when torch sees a GPU) and
/// exports the Kineto trace. With a schedule, the profiler steps after every optimizer step
/// (a global optimizer hook: the target's code is not touched) and each active cycle is
/// exported as `trace-<n>.json.gz`; without one the whole run is `trace.json.gz`. Writes
/// `torch-profiler.json` with what happened (steps seen, traces written, CUDA or not).
/// argv: run dir, schedule (`wait,warmup,active,repeat` or empty), record_shapes,
/// profile_memory, with_stack (0/1), then the target.
pub(crate) const TORCH_RUNNER: &str = r#"
import json, os, runpy, sys
out_dir, schedule, shapes, memory, stack = sys.argv[1:6]
rest = sys.argv[6:]
try:
    import torch
    from torch.profiler import ProfilerActivity, profile
except Exception as e:
    sys.stderr.write("torch cannot be imported: %s\n" % e)
    sys.exit(97)
acts = [ProfilerActivity.CPU]
cuda = torch.cuda.is_available()
if cuda:
    acts.append(ProfilerActivity.CUDA)
state = {"steps": 0, "traces": [], "cuda": cuda}
def ready(p):
    path = os.path.join(out_dir, "trace-%d.json.gz" % len(state["traces"]))
    p.export_chrome_trace(path)
    state["traces"].append(path)
kwargs = dict(activities=acts, record_shapes=shapes == "1", profile_memory=memory == "1", with_stack=stack == "1")
if schedule:
    w, wu, a, r = (int(x) for x in schedule.split(","))
    kwargs["schedule"] = torch.profiler.schedule(wait=w, warmup=wu, active=a, repeat=r)
    kwargs["on_trace_ready"] = ready
prof = profile(**kwargs)
def stepped(optimizer, args, kw):
    state["steps"] += 1
    if schedule:
        prof.step()
from torch.optim.optimizer import register_optimizer_step_post_hook
register_optimizer_step_post_hook(stepped)
code = 0
prof.__enter__()
try:
    if rest[:1] == ["-m"]:
        sys.argv = [rest[1]] + rest[2:]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        sys.path.insert(0, os.path.dirname(os.path.realpath(rest[0])))
        runpy.run_path(rest[0], run_name="__main__")
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
finally:
    prof.__exit__(None, None, None)
    if not schedule:
        path = os.path.join(out_dir, "trace.json.gz")
        prof.export_chrome_trace(path)
        state["traces"].append(path)
    with open(os.path.join(out_dir, "torch-profiler.json"), "w") as f:
        json.dump(state, f)
sys.exit(code)
"#;

/// The target under torch.profiler, its Kineto trace(s) analysed like `analyze_trace` does.
pub(crate) async fn torch_profiler(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (interpreter, script) = split_python(input)?;
    let python = interpreter[0].clone();
    let flag = |o: Option<bool>| if o == Some(true) { "1" } else { "0" }.to_string();
    let schedule = input
        .options
        .schedule
        .map(|s| {
            format!(
                "{},{},{},{}",
                s.wait,
                s.warmup,
                s.active.max(1),
                s.repeat.max(1)
            )
        })
        .unwrap_or_default();
    let mut argv = interpreter;
    argv.extend([
        "-c".into(),
        TORCH_RUNNER.into(),
        place.dir.to_string_lossy().into_owned(),
        schedule.clone(),
        flag(input.options.record_shapes),
        flag(input.options.profile_memory),
        flag(input.options.with_stack),
    ]);
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if e.stderr_tail.contains("torch cannot be imported") {
        e.error = Some(format!(
            "torch cannot be imported by {python}: run the profile with the interpreter the program uses (its venv), or install torch there"
        ));
        return Ok(e);
    }
    let state: serde_json::Value =
        serde_json::from_str(&read(&place.dir.join("torch-profiler.json"))).unwrap_or_default();
    let traces: Vec<PathBuf> = state["traces"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(PathBuf::from))
                .collect()
        })
        .unwrap_or_default();
    if !schedule.is_empty() && state["steps"].as_u64() == Some(0) {
        // Nothing was traced: a run that says it profiled would be sold as coverage.
        e.status = RunStatus::Failed;
        e.error = Some(
            "the program made no optimizer step, so the profiler's schedule never started and nothing was traced: run again without options.schedule to trace the whole run".into(),
        );
    }
    if state["cuda"] == false {
        e.warnings
            .push("torch sees no GPU: the trace has CPU operators only".into());
    }
    // The last active cycle is the one analysed (the first ones still warm up caches).
    if let Some(last) = traces.last() {
        let file = std::fs::File::open(last).map_err(|err| {
            RunError::new(
                RunErrorKind::Io,
                format!("cannot read {}: {err}", last.display()),
            )
        })?;
        let parsed =
            system_profile_parse::kineto::analyze_reader(flate2::read::GzDecoder::new(file));
        e.warnings.extend(
            parsed
                .diagnostics
                .iter()
                .filter(|d| state["cuda"] != false || !d.message.starts_with("no GPU kernels"))
                .map(|d| format!("trace: {}", d.message)),
        );
        e.metrics.trace = Some(parsed.value);
    }
    for t in traces {
        e.artifacts.extend(file_artifact(t, "kineto_trace"));
    }
    e.artifacts.extend(file_artifact(
        place.dir.join("torch-profiler.json"),
        "torch_profiler_state",
    ));
    explain_exit(&mut e);
    Ok(e)
}
