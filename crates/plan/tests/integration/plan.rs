//! Plans on this machine's real detection and on a GPU machine's: only usable tools, every
//! applicable metric family covered or explained, `run_profiler` and `instrument_file`
//! arguments that their schemas accept.

use crate::fixture::{fixture, gpu_machine, identify_here, real_detect};
use serde_json::Value;
use std::path::PathBuf;
use system_profile_model::detect::DetectReport;
use system_profile_model::instrument::InstrumentFileInput;
use system_profile_model::plan::{CoverageStatus, Plan, PlanStep};
use system_profile_model::run::{
    AfterTrace, Method, MetricFamily, RunProfilerInput, RunTarget, TargetMode,
};
use system_profile_model::target::{Focus, Target};
use system_profile_plan::planner::{plan, PlanOptions};
use system_profile_plan::Recipes;

fn options(root: PathBuf, programs: fn(&str) -> bool) -> PlanOptions {
    PlanOptions {
        focus: Vec::new(),
        time_budget_s: None,
        root,
        program_exists: programs,
        lang: Default::default(),
    }
}

fn on_path(p: &str) -> bool {
    system_profile_exec::which(p).is_some()
}

fn every_program(_: &str) -> bool {
    true
}

fn validator<T: schemars::JsonSchema>() -> jsonschema::Validator {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// What every plan must satisfy, whatever the target and machine.
fn check_plan(p: &Plan, detect: &DetectReport, what: &str) -> Vec<String> {
    let run_schema = validator::<RunProfilerInput>();
    let instr_schema = validator::<InstrumentFileInput>();
    let mut problems = Vec::new();
    if p.needs_clarification {
        problems.push(format!("needs clarification: {:?}", p.questions));
    }
    if p.steps.is_empty()
        && !(p
            .notes
            .iter()
            .any(|n| n.contains("nothing in this plan can run here"))
            && p.coverage
                .iter()
                .all(|c| c.status != CoverageStatus::Covered))
    {
        problems.push("no steps, and no note saying why".into());
    }
    for s in &p.steps {
        if let Some(tool) = &s.tool {
            let usable = detect.tools.iter().any(|t| &t.id == tool && t.usable);
            if !usable {
                problems.push(format!(
                    "{} uses {tool}, which detect_tools reports unusable",
                    s.id
                ));
            }
        }
        let json = serde_json::to_value(&s.run_profiler).unwrap();
        if let Err(e) = run_schema.validate(&json) {
            problems.push(format!(
                "{}: run_profiler arguments rejected by the schema: {e}: {json}",
                s.id
            ));
        }
        let back: RunProfilerInput = serde_json::from_value(json.clone()).unwrap();
        if back != s.run_profiler {
            problems.push(format!(
                "{}: run_profiler arguments do not round-trip",
                s.id
            ));
        }
        let target_ok = match (&s.run_profiler.target, s.mode) {
            (RunTarget::Command { command, .. }, TargetMode::Launch) => !command.is_empty(),
            (RunTarget::Pid { .. }, TargetMode::Attach) => {
                s.run_profiler.duration_s.is_some() || s.method == Method::PySpyDump
            }
            (RunTarget::System { system: true }, TargetMode::Machine) => true,
            _ => false,
        };
        if !target_ok {
            problems.push(format!(
                "{}: target {:?} does not fit mode {:?}",
                s.id, s.run_profiler.target, s.mode
            ));
        }
        if !s.method.spec().modes.contains(&s.mode) {
            problems.push(format!(
                "{}: {} cannot run in mode {:?}",
                s.id,
                s.method.id(),
                s.mode
            ));
        }
        if let Some(a) = &s.alongside {
            if !p.steps.iter().any(|o| &o.id == a) || !s.run_profiler.background {
                problems.push(format!(
                    "{}: alongside {a} is not a step, or not in the background",
                    s.id
                ));
            }
        }
    }
    for c in &p.coverage {
        match c.status {
            CoverageStatus::Covered => {
                if c.steps.is_empty() {
                    problems.push(format!("{:?} covered by no step", c.family));
                }
            }
            CoverageStatus::ByInstrumentation => {}
            CoverageStatus::Uncovered | CoverageStatus::NotApplicable => {
                if c.reason.as_deref().unwrap_or("").is_empty() {
                    problems.push(format!("{:?} {:?} without a reason", c.family, c.status));
                }
            }
        }
    }
    for i in &p.instrumentation {
        if let Some(args) = &i.instrument_file {
            let json = serde_json::to_value(args).unwrap();
            if let Err(e) = instr_schema.validate(&json) {
                problems.push(format!("instrument_file arguments rejected: {e}: {json}"));
            }
            let outline = p
                .target
                .script
                .as_ref()
                .and_then(|s| s.outline.as_ref())
                .or_else(|| p.target.function.as_ref().and_then(|f| f.outline.as_ref()));
            if let (Some(f), Some(o)) = (&args.function, outline) {
                if !o.defs.iter().any(|d| &d.qualname == f) {
                    problems.push(format!(
                        "instrument_file names `{f}`, which the file does not define"
                    ));
                }
            }
        }
    }
    problems
        .into_iter()
        .map(|p| format!("{what}: {p}"))
        .collect()
}

async fn targets() -> Vec<(String, Target)> {
    let fx = fixture();
    let mut out = Vec::new();
    for args in [
        "train.py".to_string(),
        "ddp_train.py interconnect".to_string(),
        "app.py:Trainer.step".to_string(),
        "app.py:11-13 memory".to_string(),
        "agents.py".to_string(),
        "ls -la".to_string(),
        format!("pid {}", fx.python_pid),
        format!("{} io", fx.service),
        "vllm serving".to_string(),
        "gpu interconnect".to_string(),
        "memory".to_string(),
        "-m mypkg.cli".to_string(),
    ] {
        let t = identify_here(&args).await;
        assert!(!t.needs_clarification, "{args}: {:?}", t.questions);
        out.push((args, t));
    }
    out
}

#[tokio::test]
async fn every_plan_uses_usable_tools_and_valid_arguments_here_and_on_a_gpu_machine() {
    let fx = fixture();
    let real = real_detect().await;
    let gpu = gpu_machine(&real);
    let mut problems = Vec::new();
    for (args, target) in targets().await {
        let here = plan(
            &target,
            &real,
            Recipes::builtin(),
            &options(fx.dir.clone(), on_path),
        );
        problems.extend(check_plan(&here, &real, &format!("{args} (this machine)")));
        // Here, a family goes unmeasured only for a missing GPU or a missing tool, and says so.
        for c in here
            .coverage
            .iter()
            .filter(|c| c.status == CoverageStatus::Uncovered)
        {
            let reason = c.reason.clone().unwrap_or_default();
            let explained = (c.family.needs_gpu()
                && (reason.contains("no NVIDIA GPU") || reason.contains("no GPU")))
                || here
                    .skipped
                    .iter()
                    .any(|s| s.fix.is_some() && reason.contains(&s.reason));
            if !explained {
                problems.push(format!(
                    "{args} (this machine): {:?} uncovered: {reason}",
                    c.family
                ));
            }
        }
        let there = plan(
            &target,
            &gpu,
            Recipes::builtin(),
            &options(fx.dir.clone(), every_program),
        );
        problems.extend(check_plan(&there, &gpu, &format!("{args} (GPU machine)")));
        for c in there
            .coverage
            .iter()
            .filter(|c| c.status == CoverageStatus::Uncovered)
        {
            problems.push(format!(
                "{args} (GPU machine): {:?} uncovered: {:?}",
                c.family, c.reason
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The steps that run `m`: as their method, or observing another's run (py-spy and perf stat
/// on `measure`'s).
fn steps_of(p: &Plan, m: Method) -> Vec<&system_profile_model::plan::PlanStep> {
    p.steps
        .iter()
        .filter(|s| s.method == m || s.run_profiler.options.observers.contains(&m))
        .collect()
}

#[tokio::test]
async fn vllm_on_a_gpu_machine_profiles_every_component_under_load() {
    let fx = fixture();
    let gpu = gpu_machine(&real_detect().await);
    let target = identify_here("vllm serving").await;
    let p = plan(
        &target,
        &gpu,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    assert_eq!(p.recipe.as_ref().unwrap().id, "vllm_serving");
    assert_eq!(
        p.focus,
        vec![Focus::Cpu, Focus::Gpu, Focus::Memory, Focus::Interconnect]
    );
    // One window for the server: its own /metrics under load (the user's, else ours), with
    // py-spy on the API server following every child (the engine core, both workers) beside it.
    let windows = steps_of(&p, Method::ServingWindow);
    assert_eq!(
        windows.len(),
        2,
        "the window, and the engine step's profile after its own"
    );
    let load = windows[0];
    assert_eq!(
        load.run_profiler.target,
        RunTarget::Pid {
            pid: fx.vllm_api_pid
        }
    );
    assert_eq!(load.run_profiler.options.engine_profile_s, Some(0.0));
    assert_eq!(windows[1].run_profiler.options.engine_profile_s, Some(2.0));
    assert!(
        windows[1].alongside.is_none(),
        "no sampler sees the trace being written"
    );
    let spies = steps_of(&p, Method::PySpyRecord);
    assert_eq!(spies.len(), 1, "{spies:#?}");
    assert_eq!(
        spies[0].run_profiler.target,
        RunTarget::Pid {
            pid: fx.vllm_api_pid
        }
    );
    assert_eq!(spies[0].run_profiler.options.subprocesses, Some(true));
    let tree: Vec<u32> = target.processes.iter().map(|p| p.pid).collect();
    for c in &target.framework.as_ref().unwrap().components {
        assert!(
            c.pids.iter().all(|p| tree.contains(p)),
            "{c:?} outside the API server's tree"
        );
    }
    assert!(spies
        .iter()
        .all(|s| s.alongside.as_deref() == Some(load.id.as_str()) && s.run_profiler.background));
    let nvml = steps_of(&p, Method::NvmlSampler);
    assert_eq!(nvml.len(), 1);
    assert_eq!(nvml[0].alongside.as_deref(), Some(load.id.as_str()));
    // Tensor parallel 2: NCCL_DEBUG on a restart of the very same server command line.
    let nccl = steps_of(&p, Method::NcclDebug);
    assert_eq!(nccl.len(), 1);
    let RunTarget::Command { command, .. } = &nccl[0].run_profiler.target else {
        panic!()
    };
    let api = target
        .processes
        .iter()
        .find(|p| p.pid == fx.vllm_api_pid)
        .unwrap();
    assert_eq!(command, &api.cmdline);
    // vLLM's own torch profiler, with a trace directory under profile_output.
    let own = p
        .steps
        .iter()
        .find(|s| {
            s.title.contains("custom")
                && s.families
                    .contains(&system_profile_model::run::MetricFamily::KernelLaunchOverhead)
        })
        .expect("vLLM's torch profiler step");
    let RunTarget::Command { command, .. } = &own.run_profiler.target else {
        panic!()
    };
    let config = command.last().unwrap();
    let parsed: Value = serde_json::from_str(config).expect("the profiler config is JSON");
    assert!(parsed["torch_profiler_dir"]
        .as_str()
        .unwrap()
        .ends_with("profile_output/vllm_torch_traces"));
    assert!(
        !steps_of(&p, Method::NvidiaSmiTopo).is_empty()
            && !steps_of(&p, Method::NvlinkStatus).is_empty()
    );
    // The restarted server runs in the background while `vllm bench serve --profile` calls
    // /start_profile and /stop_profile.
    let profiled = p
        .steps
        .iter()
        .find(|s| s.run_profiler.label.as_deref() == Some("profiled load"))
        .expect("a profiled load");
    let RunTarget::Command { command, .. } = &profiled.run_profiler.target else {
        panic!()
    };
    assert_eq!(command.last().map(String::as_str), Some("--profile"));
    assert_eq!(own.alongside.as_deref(), Some(profiled.id.as_str()));
    assert!(own.run_profiler.background);
    let own_pos = p.steps.iter().position(|s| s.id == own.id).unwrap();
    let profiled_pos = p.steps.iter().position(|s| s.id == profiled.id).unwrap();
    assert!(own_pos < profiled_pos, "the server starts before the load");
    // On this machine the GPU parts are skipped with the reason; the window needs no program
    // of the machine's (its load is its own), so the samplers still run beside it.
    let real = real_detect().await;
    let here = plan(
        &target,
        &real,
        Recipes::builtin(),
        &options(fx.dir.clone(), |_| false),
    );
    assert!(steps_of(&here, Method::NvmlSampler).is_empty());
    assert!(here
        .skipped
        .iter()
        .any(|s| s.method == Method::NcclDebug && s.reason.contains("no NVIDIA GPU")));
    let window = steps_of(&here, Method::ServingWindow)[0];
    assert!(here
        .steps
        .iter()
        .filter(|s| s.alongside.is_some())
        .all(|s| s.alongside.as_deref() == Some(window.id.as_str())));
}

#[tokio::test]
async fn fallbacks_follow_the_order_and_skips_carry_the_fix() {
    let fx = fixture();
    let real = real_detect().await;
    let mut d = real.clone();
    for t in &mut d.tools {
        // As detect_tools reports a tool that is not installed.
        if matches!(t.id.as_str(), "py_spy" | "memray" | "time" | "perf") {
            t.available = false;
            t.usable = false;
            t.reason = Some(format!("`{}` is not on PATH", t.id));
            t.install_hint = Some(format!("pip install {}", t.id.replace('_', "-")));
        }
    }
    let target = identify_here("train.py cpu memory").await;
    let p = plan(
        &target,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), on_path),
    );
    let hot = p
        .steps
        .iter()
        .find(|s| s.run_profiler.label.as_deref() == Some("python hotspots"))
        .unwrap();
    assert_eq!(hot.method, Method::Cprofile);
    assert_eq!(hot.instead_of, vec![Method::PySpyRecord]);
    let skip = p
        .skipped
        .iter()
        .find(|s| s.method == Method::PySpyRecord)
        .unwrap();
    assert_eq!(skip.fix.as_deref(), Some("pip install py-spy"));
    let alloc = p
        .steps
        .iter()
        .find(|s| s.run_profiler.label.as_deref() == Some("allocation sites on the host"))
        .unwrap();
    assert_eq!(alloc.method, Method::Tracemalloc);
    // measure and time_v both need /usr/bin/time: the procfs sampler stands in.
    let overall = p
        .steps
        .iter()
        .find(|s| s.run_profiler.label.as_deref() == Some("overall cost"))
        .unwrap();
    assert_eq!(overall.method, Method::ProcfsSampler);
    assert_eq!(overall.instead_of, vec![Method::Measure, Method::TimeV]);

    // perf gone: the counters come from /usr/bin/time -v, which the overall run already gives.
    let native = plan(
        &identify_here("ls -la").await,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), on_path),
    );
    assert!(steps_of(&native, Method::PerfStat).is_empty());
    let perf = native
        .skipped
        .iter()
        .find(|s| s.method == Method::PerfStat)
        .unwrap();
    assert_eq!(perf.fix.as_deref(), Some("pip install perf"));
    let mut with_time = d.clone();
    for t in &mut with_time.tools {
        if t.id == "time" {
            t.available = true;
            t.usable = true;
        }
    }
    let native = plan(
        &identify_here("ls -la").await,
        &with_time,
        Recipes::builtin(),
        &options(fx.dir.clone(), on_path),
    );
    assert_eq!(native.steps[0].method, Method::Measure);
    assert!(
        steps_of(&native, Method::TimeV).is_empty(),
        "measure already runs time -v"
    );
    // Software counters only: the perf step says so, as detect_tools did.
    if let Some(perf) = real
        .tools
        .iter()
        .find(|t| t.id == "perf" && t.usable && !t.notes.is_empty())
    {
        let here = plan(
            &identify_here("ls -la").await,
            &real,
            Recipes::builtin(),
            &options(fx.dir.clone(), on_path),
        );
        let step = steps_of(&here, Method::PerfStat)[0];
        assert!(
            perf.notes.iter().all(|n| step.notes.contains(n)),
            "{:?}",
            step.notes
        );
    }

    // On a GPU machine without NVML, nvidia-smi dmon samples the GPUs.
    let mut g = gpu_machine(&real);
    for t in &mut g.tools {
        if t.id == "nvml" {
            t.usable = false;
            t.reason = Some("libnvidia-ml.so.1 could not be loaded".into());
        }
    }
    let p = plan(
        &identify_here("train.py gpu").await,
        &g,
        Recipes::builtin(),
        &options(fx.dir.clone(), on_path),
    );
    let sampler = p
        .steps
        .iter()
        .find(|s| s.run_profiler.label.as_deref() == Some("GPU utilisation and memory"))
        .unwrap();
    assert_eq!(sampler.method, Method::NvidiaSmiDmon);
    assert_eq!(sampler.instead_of, vec![Method::NvmlSampler]);

    // Attaching refused: the advice becomes the fix.
    let mut no_attach = gpu_machine(&real);
    no_attach.permissions.can_attach_to_pid = false;
    no_attach.permissions.attach_advice = Some("set kernel.yama.ptrace_scope=0".into());
    let svc = identify_here(&fx.service).await;
    let p = plan(
        &svc,
        &no_attach,
        Recipes::builtin(),
        &options(fx.dir.clone(), on_path),
    );
    assert!(steps_of(&p, Method::PySpyRecord).is_empty());
    let s = p
        .skipped
        .iter()
        .find(|s| s.method == Method::PySpyRecord)
        .unwrap();
    assert_eq!(s.fix.as_deref(), Some("set kernel.yama.ptrace_scope=0"));
}

#[tokio::test]
async fn a_time_budget_shortens_windows_then_drops_what_does_not_fit() {
    let fx = fixture();
    let gpu = gpu_machine(&real_detect().await);
    let target = identify_here(&format!("{} cpu io system", fx.service)).await;
    let full = plan(
        &target,
        &gpu,
        Recipes::builtin(),
        &options(fx.dir.clone(), on_path),
    );
    assert!(full.estimated_wall_s > 60.0, "{}", full.estimated_wall_s);
    let mut o = options(fx.dir.clone(), on_path);
    o.time_budget_s = Some(40.0);
    let tight = plan(&target, &gpu, Recipes::builtin(), &o);
    assert!(tight.estimated_wall_s <= 40.0, "{}", tight.estimated_wall_s);
    assert!(tight
        .steps
        .iter()
        .filter_map(|s| s.run_profiler.duration_s)
        .all(|d| d >= 5.0));
    assert!(
        tight.notes.iter().any(|n| n.contains("shortened")),
        "{:?}",
        tight.notes
    );
    o.time_budget_s = Some(10.0);
    let tiny = plan(&target, &gpu, Recipes::builtin(), &o);
    assert!(tiny.estimated_wall_s <= 10.0);
    assert!(tiny
        .skipped
        .iter()
        .any(|s| s.reason.contains("over the time budget")));
}

#[tokio::test]
async fn focus_decides_the_families_and_unresolved_targets_get_no_steps() {
    let fx = fixture();
    let gpu = gpu_machine(&real_detect().await);
    let t = identify_here("ddp_train.py").await;
    let mut o = options(fx.dir.clone(), on_path);
    o.focus = vec![Focus::Interconnect];
    let p = plan(&t, &gpu, Recipes::builtin(), &o);
    assert_eq!(p.focus_source, "given to plan_profile");
    let fams: Vec<_> = p.coverage.iter().map(|c| c.family).collect();
    use system_profile_model::run::MetricFamily as F;
    for f in [
        F::Topology,
        F::PeerTransfers,
        F::NcclCollectives,
        F::CommComputeRatio,
        F::HostDeviceTransfers,
    ] {
        assert!(fams.contains(&f), "{f:?} in {fams:?}");
    }
    assert!(!fams.contains(&F::CpuHotspots));
    let nccl: Vec<Option<&str>> = p
        .instrumentation
        .iter()
        .filter(|i| i.measure == system_profile_model::instrument::Measure::Nccl)
        .map(|i| i.instrument_file.as_ref().unwrap().function.as_deref())
        .collect();
    // `setup` calls init_process_group, `train` calls all_reduce.
    assert_eq!(nccl, vec![Some("setup"), Some("train")]);

    let unresolved = identify_here("trian.py").await;
    let p = plan(
        &unresolved,
        &gpu,
        Recipes::builtin(),
        &options(fx.dir.clone(), on_path),
    );
    assert!(p.needs_clarification && p.steps.is_empty() && p.recipe.is_none());
    assert!(p.questions[0].contains("train.py"));
}

#[test]
fn every_recipe_file_matches_the_published_schema() {
    let schema = validator::<system_profile_model::recipe::Recipe>();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let value: toml::Value = toml::from_str(&text).unwrap();
        let json = serde_json::to_value(value).unwrap();
        if let Err(e) = schema.validate(&json) {
            panic!("{}: {e}", path.display());
        }
        n += 1;
    }
    assert_eq!(n, Recipes::builtin().recipes.len());
}

#[tokio::test]
async fn the_torch_profiler_schedule_needs_an_optimizer_in_the_source() {
    let fx = fixture();
    let gpu = gpu_machine(&real_detect().await);
    // The fixture's train.py updates nothing through an optimizer (its `Trainer.step` is its
    // own method): a schedule, which advances on optimizer steps, would never start.
    std::fs::write(
        fx.dir.join("train_sgd.py"),
        "import torch\n\n\ndef main():\n    model = torch.nn.Linear(4, 4)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for _ in range(10):\n        opt.zero_grad()\n        model(torch.randn(8, 4).cuda()).sum().backward()\n        opt.step()\n\n\nmain()\n",
    )
    .unwrap();
    for (script, scheduled) in [("train.py", false), ("train_sgd.py", true)] {
        let target = identify_here(&format!("{script} gpu")).await;
        let p = plan(
            &target,
            &gpu,
            Recipes::builtin(),
            &options(fx.dir.clone(), every_program),
        );
        let steps = steps_of(&p, Method::TorchProfiler);
        assert!(!steps.is_empty(), "{script}: {:#?}", p.steps);
        for s in steps {
            assert_eq!(
                s.run_profiler.options.schedule.is_some(),
                scheduled,
                "{script}: {:?}",
                s.run_profiler.options
            );
            // A window of steps, and the program ended after it: the trace needs no more.
            if let Some(schedule) = s.run_profiler.options.schedule {
                assert_eq!(schedule.after_trace, AfterTrace::EndProgram, "{schedule:?}");
            }
        }
        let said = p
            .notes
            .iter()
            .any(|n| n.contains("makes no torch optimizer"));
        assert_eq!(said, !scheduled, "{script}: {:?}", p.notes);
    }
    // On the CPU the operator step takes the same window.
    let mut cpu = real_detect().await;
    cpu.hardware.gpu.gpus.clear();
    cpu.hardware.gpu.nvml_available = false;
    let target = identify_here("train_sgd.py cpu").await;
    let p = plan(
        &target,
        &cpu,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    let steps = steps_of(&p, Method::TorchProfiler);
    assert_eq!(steps.len(), 1, "{:#?}", p.steps);
    let schedule = steps[0].run_profiler.options.schedule.expect("a window");
    assert_eq!(
        (
            schedule.wait,
            schedule.warmup,
            schedule.active,
            schedule.after_trace
        ),
        (3, 1, 3, AfterTrace::EndProgram)
    );
}

/// `idle`, `native` and `leaks` after the target turn those switches on in every step whose
/// method reads them (py-spy's `--idle` and `--native`, memray's `--native` and leak view),
/// and in no other; a switch that no planned step reads is said; after `--` the word is the
/// script's.
#[tokio::test]
async fn words_ask_for_profiler_switches_on_the_steps_that_read_them() {
    use system_profile_model::options::AskedOption;
    let fx = fixture();
    let mut d = real_detect().await;
    for t in &mut d.tools {
        if matches!(t.id.as_str(), "py_spy" | "memray") {
            t.available = true;
            t.usable = true;
        }
    }
    let target = identify_here("train.py idle native leaks").await;
    assert_eq!(
        target.asked_options,
        [AskedOption::Idle, AskedOption::Native, AskedOption::Leaks]
    );
    assert_eq!(
        target.focus,
        [Focus::Cpu, Focus::Memory],
        "idle is about the stacks, leaks about memory"
    );
    let p = plan(
        &target,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    let spy = steps_of(&p, Method::PySpyRecord);
    assert!(!spy.is_empty(), "{:#?}", p.steps);
    for s in &spy {
        let o = &s.run_profiler.options;
        assert_eq!((o.idle, o.native, o.leaks), (Some(true), Some(true), None));
    }
    let memray = steps_of(&p, Method::Memray);
    assert_eq!(memray.len(), 1, "{:#?}", p.steps);
    let o = &memray[0].run_profiler.options;
    assert_eq!((o.idle, o.native, o.leaks), (None, Some(true), Some(true)));
    assert_eq!(o.temporal, None, "not asked");
    let runs_a_reader = |s: &&system_profile_model::plan::PlanStep| {
        matches!(s.method, Method::PySpyRecord | Method::Memray)
            || s.run_profiler
                .options
                .observers
                .contains(&Method::PySpyRecord)
    };
    for s in p.steps.iter().filter(|s| !runs_a_reader(s)) {
        let o = &s.run_profiler.options;
        assert_eq!((o.idle, o.native, o.leaks), (None, None, None), "{}", s.id);
    }
    assert!(check_plan(&p, &d, "asked switches").is_empty());

    // Without memray, tracemalloc stands in and has no leak view: said, with who has one.
    for t in &mut d.tools {
        if t.id == "memray" {
            t.available = false;
            t.usable = false;
        }
    }
    let p = plan(
        &identify_here("train.py leaks").await,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    assert!(steps_of(&p, Method::Memray).is_empty());
    assert!(
        p.notes
            .iter()
            .any(|n| n.starts_with("`leaks` was asked for") && n.contains("`memray`")),
        "{:#?}",
        p.notes
    );

    // In Japanese too: リーク asks for memray's leak view.
    let ja = identify_here("train.py のリーク").await;
    assert_eq!(ja.asked_options, [AskedOption::Leaks]);
    assert!(ja.focus.contains(&Focus::Memory));
    // `temporal` asks for memray's flame graph over time, and so for memory; without memray
    // the note says who draws one.
    let temporal = identify_here("train.py temporal").await;
    assert_eq!(temporal.asked_options, [AskedOption::Temporal]);
    assert!(temporal.focus.contains(&Focus::Memory));
    for t in &mut d.tools {
        if t.id == "memray" {
            (t.available, t.usable) = (true, true);
        }
    }
    let p = plan(
        &temporal,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    let memray = steps_of(&p, Method::Memray);
    assert_eq!(memray.len(), 1, "{:#?}", p.steps);
    assert_eq!(memray[0].run_profiler.options.temporal, Some(true));

    // After `--` it is the script's argument.
    let passed_on = identify_here("train.py -- idle").await;
    assert!(passed_on.asked_options.is_empty());
    assert_eq!(passed_on.script.unwrap().argv, ["idle"]);
}

/// py-spy and perf stat watch measure's run of the program instead of starting it again:
/// one run for the three; without permission to attach, py-spy starts it in a run of its own.
#[tokio::test]
async fn observers_share_one_run_of_the_program() {
    let fx = fixture();
    let mut d = real_detect().await;
    for t in &mut d.tools {
        if matches!(t.id.as_str(), "py_spy" | "perf" | "time") {
            t.available = true;
            t.usable = true;
        }
    }
    d.permissions.can_attach_to_pid = true;
    let target = identify_here("train.py cpu").await;
    let p = plan(
        &target,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    let measure: Vec<_> = p
        .steps
        .iter()
        .filter(|s| s.method == Method::Measure)
        .collect();
    assert_eq!(measure.len(), 1, "{:#?}", p.steps);
    let m = measure[0];
    // perf stat joins where the plan has it (not for a torch training's CPU focus).
    let observers = &m.run_profiler.options.observers;
    assert_eq!(observers[0], Method::PySpyRecord, "{:#?}", p.steps);
    assert!(p
        .steps
        .iter()
        .all(|s| !matches!(s.method, Method::PySpyRecord | Method::PerfStat)));
    for file in ["time-v.txt", "py-spy.folded"] {
        assert!(m.artifacts.iter().any(|a| a == file), "{:?}", m.artifacts);
    }
    assert_eq!(
        m.artifacts.iter().any(|a| a == "perf-stat.csv"),
        observers.contains(&Method::PerfStat)
    );
    assert!(
        m.title.starts_with("measure + py_spy_record"),
        "{}",
        m.title
    );
    let hotspots = p
        .coverage
        .iter()
        .find(|c| c.family == system_profile_model::run::MetricFamily::CpuHotspots)
        .unwrap();
    assert_eq!(hotspots.status, CoverageStatus::Covered, "{hotspots:?}");
    assert!(hotspots.steps.contains(&m.id), "{hotspots:?}");

    d.permissions.can_attach_to_pid = false;
    let p = plan(
        &target,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    let spy: Vec<_> = p
        .steps
        .iter()
        .filter(|s| s.method == Method::PySpyRecord)
        .collect();
    assert_eq!(spy.len(), 1, "{:#?}", p.steps);
    let m = p
        .steps
        .iter()
        .find(|s| s.method == Method::Measure)
        .unwrap();
    assert!(!m
        .run_profiler
        .options
        .observers
        .contains(&Method::PySpyRecord));
    // A plain measure lists no observer's files.
    let alone = plan(
        &identify_here("train.py memory").await,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    let m = alone
        .steps
        .iter()
        .find(|s| s.method == Method::Measure)
        .unwrap();
    assert!(m.run_profiler.options.observers.is_empty(), "{m:?}");
    assert!(
        !m.artifacts.iter().any(|a| a == "py-spy.folded"),
        "{:?}",
        m.artifacts
    );
}

/// The recipe's default focus plans the allocation profile after the measure run, to run only
/// if that run shows memory worth it; a focus the user named runs it whatever the measure
/// shows.
#[tokio::test]
async fn an_allocation_profile_waits_for_the_measure_run_unless_memory_was_named() {
    let fx = fixture();
    let mut d = real_detect().await;
    for t in &mut d.tools {
        if matches!(t.id.as_str(), "py_spy" | "perf" | "time" | "memray") {
            t.available = true;
            t.usable = true;
        }
    }
    let allocation_steps = |p: &Plan| -> Vec<PlanStep> {
        p.steps
            .iter()
            .filter(|s| s.families.contains(&MetricFamily::AllocationSites))
            .cloned()
            .collect()
    };
    let p = plan(
        &identify_here("app.py").await,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    let steps = allocation_steps(&p);
    assert!(!steps.is_empty(), "{:#?}", p.steps);
    let measure = p
        .steps
        .iter()
        .find(|s| s.method == Method::Measure)
        .unwrap();
    for s in &steps {
        let runs_if = s.runs_if.as_ref().unwrap_or_else(|| panic!("{s:#?}"));
        assert_eq!(runs_if.after_step, measure.id);
        assert_eq!(
            runs_if.condition,
            system_profile_model::plan::RunCondition::MemoryMatters
        );
    }
    let p = plan(
        &identify_here("app.py memory").await,
        &d,
        Recipes::builtin(),
        &options(fx.dir.clone(), every_program),
    );
    let steps = allocation_steps(&p);
    assert!(!steps.is_empty(), "{:#?}", p.steps);
    assert!(steps.iter().all(|s| s.runs_if.is_none()), "{steps:#?}");
}
