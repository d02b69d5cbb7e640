//! Step 2: a target, a focus and the detected tools → an ordered plan. Pure: the same inputs
//! give the same plan, so it is tested without running anything.
//!
//! The recipe gives the steps and their order; each step takes the first of its methods that
//! can run here (tool usable, permission granted, GPU present, mode fits the target); metric
//! families the focus asks for and no recipe step measures are filled from the method catalog,
//! lowest overhead first; what cannot be measured is said, with the reason.

use crate::recipe::{fill, Recipes};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use system_profile_model::detect::DetectReport;
use system_profile_model::instrument::{InstrumentFileInput, LineRange, Measure};
use system_profile_model::plan::{
    CoverageStatus, DetectionUsed, FamilyCoverage, InstrumentSuggestion, Plan, PlanStep, RecipeRef,
    SkippedMethod,
};
use system_profile_model::recipe::{InstrumentRule, Per, Recipe, Step, When};
use system_profile_model::run::{
    Method, MetricFamily, ProfilerOptions, RunProfilerInput, RunTarget, TargetMode,
};
use system_profile_model::target::{Focus, ProcessInfo, PythonOutline, Target, TargetKind};

/// What the caller adds to the target.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Focus to plan for; empty: the target's, else the recipe's default.
    pub focus: Vec<Focus>,
    pub time_budget_s: Option<f64>,
    /// The server's root: `instrument_file` only edits files under it.
    pub root: PathBuf,
    /// Whether a program can be started (a load generator's CLI); `exec::which` in the server.
    pub program_exists: fn(&str) -> bool,
}

/// Default observation window of attach and machine steps, in seconds.
const DEFAULT_WINDOW_S: f64 = 30.0;
/// The shortest window a budget may cut a step down to.
const MIN_WINDOW_S: f64 = 5.0;
/// At most this many processes get a per-process step; the rest are named in a note.
const MAX_PER_PROCESS: usize = 16;

/// Packages whose import means the code uses a GPU.
const GPU_PACKAGES: &[&str] = &[
    "torch",
    "cupy",
    "jax",
    "tensorflow",
    "vllm",
    "sglang",
    "triton",
    "numba",
    "transformers",
];

/// Facts about the target and machine that steps and families depend on.
struct Context<'a> {
    target: &'a Target,
    detect: &'a DetectReport,
    gpu_count: usize,
    gpu_present: bool,
    python: bool,
    running: bool,
    launchable: bool,
    facts: BTreeMap<String, String>,
    package_version: Option<String>,
    outline: Option<&'a PythonOutline>,
    profile_output: PathBuf,
    recipe_distributed: bool,
}

impl<'a> Context<'a> {
    fn new(
        target: &'a Target,
        detect: &'a DetectReport,
        root: &Path,
        recipe: Option<&Recipe>,
    ) -> Self {
        let gpu_count = detect.hardware.gpu.gpus.len();
        let smi_usable = detect
            .tools
            .iter()
            .any(|t| t.id == "nvidia_smi" && t.usable);
        let python = match target.kind {
            TargetKind::PythonScript | TargetKind::PythonModule | TargetKind::Function => true,
            TargetKind::Command => target.program.as_ref().is_some_and(|p| p.is_python),
            TargetKind::Process | TargetKind::Service | TargetKind::Framework => {
                target.processes.iter().any(|p| p.is_python)
                    || (target.processes.is_empty() && target.framework.is_some())
            }
            TargetKind::Focus | TargetKind::Unknown => false,
        };
        let outline = target
            .function
            .as_ref()
            .and_then(|f| f.outline.as_ref())
            .or_else(|| target.script.as_ref().and_then(|s| s.outline.as_ref()));
        let root = std::path::absolute(root).unwrap_or(root.to_path_buf());
        Context {
            target,
            detect,
            gpu_count,
            gpu_present: gpu_count > 0 || smi_usable,
            python,
            running: !target.processes.is_empty(),
            launchable: target.command.is_some(),
            facts: target
                .framework
                .as_ref()
                .map(|f| f.facts.clone())
                .unwrap_or_default(),
            package_version: target
                .framework
                .as_ref()
                .and_then(|f| f.package_version.clone()),
            outline,
            profile_output: root.join("profile_output"),
            recipe_distributed: recipe.is_some_and(|r| r.distributed),
        }
    }

    fn multi_gpu(&self) -> bool {
        self.gpu_count > 1
    }

    /// The code uses a GPU library, or the framework is a GPU one.
    fn gpu_code(&self) -> bool {
        self.outline
            .is_some_and(|o| o.imports.iter().any(|i| GPU_PACKAGES.contains(&i.as_str())))
            || self.target.framework.as_ref().is_some_and(|f| {
                f.package
                    .as_deref()
                    .is_some_and(|p| GPU_PACKAGES.contains(&p))
            })
    }

    /// Several processes talk over NCCL: a distributed recipe, or tensor parallel > 1.
    fn distributed(&self) -> bool {
        let tp = self
            .facts
            .get("tensor_parallel")
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(1.0);
        tp > 1.0 || self.recipe_distributed
    }

    fn holds(&self, when: &When) -> Result<(), String> {
        let check = |ok: bool, why: String| if ok { Ok(()) } else { Err(why) };
        if let Some(g) = when.gpu {
            check(
                g == self.gpu_present,
                if g {
                    format!("no NVIDIA GPU here{}", self.gpu_reason())
                } else {
                    "only without a GPU".into()
                },
            )?;
        }
        if let Some(m) = when.multi_gpu {
            check(
                m == self.multi_gpu(),
                format!(
                    "needs more than one GPU; this machine has {}",
                    self.gpu_count
                ),
            )?;
        }
        if let Some(r) = when.running {
            check(
                r == self.running,
                if r {
                    "the target is not running".into()
                } else {
                    "the target is already running".into()
                },
            )?;
        }
        if let Some(p) = when.python {
            check(p == self.python, "the target is not Python".into())?;
        }
        if let Some(f) = when.function {
            check(
                f == self.target.function.is_some(),
                "no function or block was named".into(),
            )?;
        }
        for (fact, min) in &when.fact_above {
            let v = self.facts.get(fact).and_then(|v| v.parse::<f64>().ok());
            check(
                v.is_some_and(|v| v > *min),
                format!(
                    "{fact} is {} (needs more than {min})",
                    v.map(|v| v.to_string()).unwrap_or_else(|| "unknown".into())
                ),
            )?;
        }
        if let Some(min) = &when.package_at_least {
            check(
                self.package_version
                    .as_deref()
                    .is_none_or(|v| version_at_least(v, min)),
                format!(
                    "needs version {min} or later; {} is installed",
                    self.package_version.clone().unwrap_or_default()
                ),
            )?;
        }
        if let Some(max) = &when.package_below {
            // Unknown version: the newer recipe step is the one to show.
            check(
                self.package_version
                    .as_deref()
                    .is_some_and(|v| !version_at_least(v, max)),
                format!("applies below version {max} only"),
            )?;
        }
        Ok(())
    }

    fn gpu_reason(&self) -> String {
        self.detect
            .hardware
            .gpu
            .reason
            .as_ref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    }
}

/// `0.13.1` ≥ `0.13`; non-numeric parts (`rc1`, `+cu128`) end the comparison.
fn version_at_least(have: &str, want: &str) -> bool {
    let nums = |s: &str| -> Vec<u64> {
        s.split(['.', '+', '-'])
            .map_while(|p| p.parse::<u64>().ok())
            .collect()
    };
    let (h, w) = (nums(have), nums(want));
    for i in 0..w.len().max(h.len()) {
        let (a, b) = (
            h.get(i).copied().unwrap_or(0),
            w.get(i).copied().unwrap_or(0),
        );
        if a != b {
            return a > b;
        }
    }
    true
}

/// Why a method cannot run here, and the fix when there is one.
struct Refusal {
    reason: String,
    fix: Option<String>,
    /// Worth telling the user (a tool, permission or GPU is missing), not just "does not fit".
    fixable: bool,
}

fn refuse(reason: impl Into<String>, fix: Option<String>, fixable: bool) -> Refusal {
    Refusal {
        reason: reason.into(),
        fix,
        fixable,
    }
}

/// Can `method` run in `mode` against this target here?
fn viable(ctx: &Context, method: Method, mode: TargetMode) -> Result<(), Refusal> {
    let spec = method.spec();
    if !spec.modes.contains(&mode) {
        let how = match mode {
            TargetMode::Launch => "start a program",
            TargetMode::Attach => "attach to a running process",
            TargetMode::Machine => "observe the whole machine",
        };
        return Err(refuse(format!("{} cannot {how}", method.id()), None, false));
    }
    if spec.python_only && !ctx.python {
        return Err(refuse(
            format!("{} reads Python; the target is not Python", method.id()),
            None,
            false,
        ));
    }
    if spec.needs_function
        && ctx
            .target
            .function
            .as_ref()
            .and_then(|f| f.qualname.as_ref())
            .is_none()
    {
        return Err(refuse(
            format!("{} needs a function to be named", method.id()),
            None,
            false,
        ));
    }
    if spec.needs_gpu && !ctx.gpu_present {
        return Err(refuse(
            format!("no NVIDIA GPU here{}", ctx.gpu_reason()),
            Some("run on a machine with an NVIDIA GPU and its driver".into()),
            true,
        ));
    }
    if spec.needs_torch && ctx.detect.python.torch.is_none() {
        return Err(refuse(
            format!(
                "torch is not importable by {}{}",
                ctx.detect.python.requested,
                ctx.detect
                    .python
                    .torch_reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
            Some("pip install torch (into the target's environment)".into()),
            true,
        ));
    }
    if let Some(tool_id) = spec.tool {
        match ctx.detect.tools.iter().find(|t| t.id == tool_id) {
            None => {
                return Err(refuse(
                    format!("{tool_id} was not checked by detect_tools"),
                    None,
                    true,
                ))
            }
            Some(t) if !t.usable => {
                return Err(refuse(
                    format!(
                        "{} is {}: {}",
                        t.name,
                        if t.available {
                            "not usable"
                        } else {
                            "not installed"
                        },
                        t.reason.clone().unwrap_or_else(|| "no reason given".into())
                    ),
                    t.install_hint.clone(),
                    true,
                ))
            }
            Some(_) => {}
        }
    }
    let ptrace = matches!(
        method,
        Method::PySpyRecord | Method::PySpyDump | Method::StraceC
    );
    if mode == TargetMode::Attach && ptrace && !ctx.detect.permissions.can_attach_to_pid {
        return Err(refuse(
            format!(
                "attaching to a running process is refused here ({})",
                method.id()
            ),
            ctx.detect.permissions.attach_advice.clone(),
            true,
        ));
    }
    Ok(())
}

/// One planned step before ids are given.
struct Draft {
    recipe_step: String,
    method: Method,
    /// Families beyond the method's own (the recipe step's `yields`).
    yields: Vec<MetricFamily>,
    mode: TargetMode,
    title: String,
    why: String,
    run: RunProfilerInput,
    alongside_step: Option<String>,
    instead_of: Vec<Method>,
    notes: Vec<String>,
}

impl Draft {
    /// A recipe step's draft, with the methods refused before the chosen one.
    fn of(
        step: &Step,
        method: Method,
        mode: TargetMode,
        title: String,
        run: RunProfilerInput,
        refused: &Refused,
    ) -> Draft {
        Draft {
            recipe_step: step.name.clone(),
            method,
            yields: step.yields.clone(),
            mode,
            title,
            why: step.why.clone(),
            run,
            alongside_step: step.alongside.clone(),
            instead_of: refused.iter().map(|(m, _)| *m).collect(),
            notes: step.notes.clone(),
        }
    }
}

/// Processes a per-process step runs on: the components named (or all with a role), Python
/// only for Python methods.
fn step_processes<'t>(ctx: &Context<'t>, step: &Step) -> Vec<&'t ProcessInfo> {
    ctx.target
        .processes
        .iter()
        .filter(|p| {
            step.components.is_empty()
                || p.role
                    .as_deref()
                    .is_some_and(|r| step.components.iter().any(|c| c == r))
        })
        .filter(|p| {
            // A framework's plumbing children (resource trackers) are left to the tree samplers.
            ctx.target.framework.is_none()
                || ctx.target.kind == TargetKind::Process
                || !p.role.as_deref().unwrap_or("").starts_with("child of")
        })
        .collect()
}

fn label_of(p: &ProcessInfo) -> String {
    match &p.role {
        Some(r) => format!("pid {} ({r})", p.pid),
        None => format!("pid {}", p.pid),
    }
}

/// Expand a recipe command: `{argv:<component>}` as a whole element becomes that component's
/// command line; other placeholders are facts or `{profile_output}`.
fn expand_command(ctx: &Context, step: &Step) -> Result<Vec<String>, String> {
    let mut argv = Vec::new();
    let lookup = |name: &str| -> Option<String> {
        if name == "profile_output" {
            return Some(ctx.profile_output.to_string_lossy().into_owned());
        }
        ctx.facts.get(name).cloned()
    };
    for arg in &step.command {
        if let Some(comp) = arg.strip_prefix("{argv:").and_then(|r| r.strip_suffix('}')) {
            let p = ctx
                .target
                .processes
                .iter()
                .find(|p| p.role.as_deref() == Some(comp))
                .ok_or_else(|| {
                    format!("needs the command line of the running {comp}, and none runs")
                })?;
            argv.extend(p.cmdline.iter().cloned());
            continue;
        }
        let (filled, missing) = fill(arg, lookup);
        if let Some(m) = missing.first() {
            return Err(format!(
                "needs `{m}`, which the target's command line does not give"
            ));
        }
        argv.push(filled);
    }
    Ok(argv)
}

fn options_for(ctx: &Context, method: Method, step: &Step) -> ProfilerOptions {
    let mut o = step.options.clone();
    if method == Method::LineProfiler || method == Method::MemoryProfiler {
        if let Some(f) = &ctx.target.function {
            if let Some(q) = &f.qualname {
                o.function = Some(format!("{}:{q}", f.path));
            }
        }
    }
    if o.gpu.is_some() {
        o.gpu = Some(ctx.gpu_present);
    }
    // Options a method does not read are dropped so each step carries only its own.
    match method {
        Method::PySpyRecord => {}
        Method::ProcfsSampler | Method::NvmlSampler => {
            o = ProfilerOptions {
                rate_hz: o.rate_hz,
                ..Default::default()
            }
        }
        Method::TorchProfiler => {
            o = ProfilerOptions {
                record_shapes: o.record_shapes,
                profile_memory: o.profile_memory,
                with_stack: o.with_stack,
                // The schedule advances on optimizer steps: without any it never starts.
                schedule: o
                    .schedule
                    .filter(|_| steps_an_optimizer(ctx) != Some(false)),
                ..Default::default()
            }
        }
        Method::Nsys => {
            o = ProfilerOptions {
                nsys_trace: if o.nsys_trace.is_empty() {
                    vec!["cuda".into(), "nvtx".into(), "osrt".into()]
                } else {
                    o.nsys_trace
                },
                ..Default::default()
            }
        }
        Method::Memray | Method::Tracemalloc => {
            o = ProfilerOptions {
                native: o.native,
                traceback_depth: o.traceback_depth,
                leaks: o.leaks,
                ..Default::default()
            }
        }
        Method::NvidiaSmiDmon | Method::NvidiaSmiQuery => {
            o = ProfilerOptions {
                interval_s: o.interval_s.or(o.rate_hz.map(|r| (1.0 / r).max(1.0))),
                ..Default::default()
            }
        }
        Method::Cprofile => o = ProfilerOptions::default(),
        Method::StraceC | Method::PerfRecord => {
            o = ProfilerOptions {
                subprocesses: o.subprocesses,
                events: o.events,
                ..Default::default()
            }
        }
        Method::NcclDebug => {
            o = ProfilerOptions {
                nccl_subsys: o.nccl_subsys,
                ..Default::default()
            }
        }
        Method::Measure => {
            o = ProfilerOptions {
                gpu: o.gpu,
                rate_hz: o.rate_hz,
                ..Default::default()
            }
        }
        _ => {}
    }
    o
}

/// Calls that make or step a torch optimizer: its classes (`torch.optim.*`) and `zero_grad`.
/// `step` alone says nothing (a trainer's own `step` method is common).
const OPTIMIZER_CALLS: [&str; 15] = [
    "zero_grad",
    "SGD",
    "Adam",
    "AdamW",
    "Adagrad",
    "Adadelta",
    "Adamax",
    "NAdam",
    "RAdam",
    "RMSprop",
    "Rprop",
    "ASGD",
    "LBFGS",
    "SparseAdam",
    "Adafactor",
];

/// Whether the target's source makes or steps a torch optimizer, itself or through a trainer
/// library; `None` without an outline of it. torch.profiler's schedule advances on optimizer
/// steps: a hand-written update (`p -= lr * p.grad`) makes none, and a schedule would then
/// trace nothing.
fn steps_an_optimizer(ctx: &Context) -> Option<bool> {
    let o = ctx.outline?;
    let trainer = o.imports.iter().any(|i| {
        matches!(
            i.as_str(),
            "lightning" | "pytorch_lightning" | "transformers" | "accelerate" | "deepspeed"
        )
    });
    let calls = o
        .defs
        .iter()
        .flat_map(|d| d.notable_calls.iter())
        .chain(o.module_level_calls.iter())
        .any(|c| OPTIMIZER_CALLS.contains(&c.as_str()));
    Some(trainer || calls)
}

/// Methods a step preferred and could not use, with why.
type Refused = Vec<(Method, Refusal)>;

/// The first viable method of a step for `mode`; the refused ones before it.
fn choose(
    ctx: &Context,
    step: &Step,
    modes: &[TargetMode],
) -> Result<(Method, TargetMode, Refused), Refused> {
    let mut refused = Vec::new();
    for m in &step.methods {
        let mut last = None;
        for mode in modes {
            match viable(ctx, *m, *mode) {
                Ok(()) => return Ok((*m, *mode, refused)),
                Err(r) => {
                    // Keep the most telling refusal: a fixable one over "does not fit".
                    if last.as_ref().is_none_or(|l: &Refusal| !l.fixable) {
                        last = Some(r);
                    }
                }
            }
        }
        if let Some(r) = last {
            refused.push((*m, r));
        }
    }
    Err(refused)
}

/// A command for a title: file names instead of full paths, at most 60 characters.
fn short_command(argv: &[String]) -> String {
    let words: Vec<&str> = argv
        .iter()
        .map(|a| {
            if a.starts_with('/') {
                a.rsplit('/').next().unwrap_or(a)
            } else {
                a.as_str()
            }
        })
        .collect();
    let line = words.join(" ");
    if line.chars().count() > 60 {
        format!("`{}…`", line.chars().take(59).collect::<String>())
    } else {
        format!("`{line}`")
    }
}

fn title_of(method: Method, target: &str) -> String {
    format!("{} on {target}", method.id())
}

fn duration(step: &Step) -> f64 {
    step.duration_s.unwrap_or(DEFAULT_WINDOW_S)
}

/// Turn the recipe's steps into drafts and skips.
fn draft_steps(
    ctx: &Context,
    program_exists: fn(&str) -> bool,
    recipe: &Recipe,
    focus: &[Focus],
    skipped: &mut Vec<SkippedMethod>,
    notes: &mut Vec<String>,
) -> Vec<Draft> {
    let mut drafts = Vec::new();
    let cwd = Some(ctx.target.cwd.clone());
    for step in &recipe.steps {
        if !step.focus.is_empty() && !step.focus.iter().any(|f| focus.contains(f)) {
            continue;
        }
        if let Err(why) = ctx.holds(&step.when) {
            // Conditions that rule a step out for this target are not news; a missing GPU is.
            if step.when.gpu == Some(true) && !ctx.gpu_present {
                skipped.push(SkippedMethod {
                    method: step.methods[0],
                    tool: step.methods[0].spec().tool.map(str::to_string),
                    step: step.name.clone(),
                    reason: why,
                    fix: Some("run on a machine with an NVIDIA GPU and its driver".into()),
                });
            }
            continue;
        }
        let mut record_refusals = |refused: &[(Method, Refusal)], all_failed: bool| {
            for (m, r) in refused {
                if r.fixable || all_failed {
                    skipped.push(SkippedMethod {
                        method: *m,
                        tool: m.spec().tool.map(str::to_string),
                        step: step.name.clone(),
                        reason: r.reason.clone(),
                        fix: r.fix.clone(),
                    });
                }
            }
        };
        let base_run = |method: Method, target: RunTarget| RunProfilerInput {
            profiler: method,
            target,
            cwd: None,
            env: BTreeMap::new(),
            duration_s: None,
            timeout_s: None,
            options: options_for(ctx, method, step),
            label: Some(step.name.clone()),
            background: step.alongside.is_some(),
        };
        match step.per {
            Per::Target => {
                let mut modes = Vec::new();
                if ctx.launchable {
                    modes.push(TargetMode::Launch);
                }
                if ctx.running {
                    modes.push(TargetMode::Attach);
                }
                modes.push(TargetMode::Machine);
                match choose(ctx, step, &modes) {
                    Ok((method, mode, refused)) => {
                        record_refusals(&refused, false);
                        let (target, what) = match mode {
                            TargetMode::Launch => {
                                let command = ctx.target.command.clone().unwrap_or_default();
                                let shown = short_command(&command);
                                (
                                    RunTarget::Command {
                                        command,
                                        shell: false,
                                    },
                                    shown,
                                )
                            }
                            TargetMode::Attach => {
                                let p = &ctx.target.processes[0];
                                (
                                    RunTarget::Pid { pid: p.pid },
                                    format!("{} and its children", label_of(p)),
                                )
                            }
                            TargetMode::Machine => (
                                RunTarget::System { system: true },
                                "the machine".to_string(),
                            ),
                        };
                        let mut run = base_run(method, target);
                        if method == Method::TorchProfiler
                            && step.options.schedule.is_some()
                            && run.options.schedule.is_none()
                        {
                            notes.push(format!(
                                "{}: the program's source makes no torch optimizer (no `torch.optim` class, no `zero_grad`, no trainer library), and torch.profiler's schedule advances on optimizer steps: the whole run is traced instead of a few steps.",
                                step.name
                            ));
                        }
                        if mode == TargetMode::Launch {
                            run.cwd = cwd.clone();
                        } else {
                            run.duration_s = Some(duration(step));
                        }
                        if mode == TargetMode::Machine && ctx.launchable && step.alongside.is_none()
                        {
                            // Observing the machine only means something while the target runs.
                            continue;
                        }
                        drafts.push(Draft::of(
                            step,
                            method,
                            mode,
                            title_of(method, &what),
                            run,
                            &refused,
                        ));
                    }
                    Err(refused) => record_refusals(&refused, true),
                }
            }
            Per::Process => {
                let procs = step_processes(ctx, step);
                if procs.is_empty() {
                    continue;
                }
                match choose(ctx, step, &[TargetMode::Attach]) {
                    Ok((method, mode, refused)) => {
                        record_refusals(&refused, false);
                        let spec = method.spec();
                        let eligible: Vec<&&ProcessInfo> = procs
                            .iter()
                            .filter(|p| !spec.python_only || p.is_python)
                            .collect();
                        if eligible.len() > MAX_PER_PROCESS {
                            notes.push(format!(
                                "{}: {} processes qualify; the plan covers the first {MAX_PER_PROCESS}",
                                step.name,
                                eligible.len()
                            ));
                        }
                        for p in eligible.into_iter().take(MAX_PER_PROCESS) {
                            let mut run = base_run(method, RunTarget::Pid { pid: p.pid });
                            // A dump is one instant; everything else observes a window.
                            run.duration_s = (method != Method::PySpyDump).then(|| duration(step));
                            run.label = Some(format!("{} — {}", step.name, label_of(p)));
                            drafts.push(Draft::of(
                                step,
                                method,
                                mode,
                                title_of(method, &label_of(p)),
                                run,
                                &refused,
                            ));
                        }
                    }
                    Err(refused) => record_refusals(&refused, true),
                }
            }
            Per::Machine => match choose(ctx, step, &[TargetMode::Machine]) {
                Ok((method, mode, refused)) => {
                    record_refusals(&refused, false);
                    let mut run = base_run(method, RunTarget::System { system: true });
                    let instant = matches!(method, Method::NvidiaSmiTopo | Method::NvlinkStatus);
                    run.duration_s = (!instant).then(|| duration(step));
                    drafts.push(Draft::of(
                        step,
                        method,
                        mode,
                        title_of(method, "the machine"),
                        run,
                        &refused,
                    ));
                }
                Err(refused) => record_refusals(&refused, true),
            },
            Per::Command => {
                let command = match expand_command(ctx, step) {
                    Ok(c) if c.first().is_some_and(|p| !program_exists(p)) => {
                        let program = c[0].clone();
                        skipped.push(SkippedMethod {
                            method: step.methods[0],
                            tool: None,
                            step: step.name.clone(),
                            reason: format!("`{program}` is not on PATH"),
                            fix: Some(format!(
                                "install what provides `{program}` into the environment, or run the equivalent by hand"
                            )),
                        });
                        continue;
                    }
                    Ok(c) => c,
                    Err(why) => {
                        skipped.push(SkippedMethod {
                            method: step.methods[0],
                            tool: step.methods[0].spec().tool.map(str::to_string),
                            step: step.name.clone(),
                            reason: why,
                            fix: None,
                        });
                        continue;
                    }
                };
                match choose(ctx, step, &[TargetMode::Launch]) {
                    Ok((method, mode, refused)) => {
                        record_refusals(&refused, false);
                        let mut run = base_run(
                            method,
                            RunTarget::Command {
                                command: command.clone(),
                                shell: false,
                            },
                        );
                        run.cwd = cwd.clone();
                        for (k, v) in &step.env {
                            let (filled, _) = fill(v, |n| {
                                (n == "profile_output")
                                    .then(|| ctx.profile_output.to_string_lossy().into_owned())
                            });
                            run.env.insert(k.clone(), filled);
                        }
                        let program = command.first().cloned().unwrap_or_default();
                        drafts.push(Draft::of(
                            step,
                            method,
                            mode,
                            title_of(method, &format!("`{program}`")),
                            run,
                            &refused,
                        ));
                    }
                    Err(refused) => record_refusals(&refused, true),
                }
            }
        }
    }
    drafts
}

/// The families a focus asks for on this target, and those ruled out with the reason.
fn applicable_families(
    ctx: &Context,
    focus: &[Focus],
) -> (Vec<MetricFamily>, Vec<(MetricFamily, String)>) {
    use MetricFamily as F;
    let mut want: Vec<F> = Vec::new();
    let mut not: Vec<(F, String)> = Vec::new();
    let whole_machine = ctx.target.kind == TargetKind::Focus;
    // GPU memory matters when the code uses a GPU library, or when its code is not read and a
    // GPU is there to be used; duplicated tensors need GPU code.
    let gpu_memory_relevant = ctx.gpu_code() || (ctx.gpu_present && ctx.outline.is_none());
    for f in focus {
        match f {
            Focus::Cpu => {
                want.extend([F::CpuUtilization, F::ContextSwitches]);
                if !whole_machine {
                    want.push(F::CpuHotspots);
                }
            }
            Focus::Memory => {
                want.push(F::CpuMemory);
                if ctx.python {
                    want.push(F::AllocationSites);
                }
                if gpu_memory_relevant {
                    want.push(F::GpuMemory);
                }
                if ctx.gpu_code() || (gpu_memory_relevant && ctx.outline.is_none()) {
                    want.push(F::RedundantCopies);
                }
            }
            Focus::Gpu => want.extend([
                F::GpuUtilization,
                F::GpuMemory,
                F::KernelLaunchOverhead,
                F::MemoryBandwidth,
                F::HostDeviceTransfers,
            ]),
            Focus::Interconnect => {
                want.extend([F::Topology, F::HostDeviceTransfers]);
                for fam in [F::PeerTransfers, F::NcclCollectives, F::CommComputeRatio] {
                    if ctx.gpu_present && !ctx.multi_gpu() && !ctx.distributed() {
                        not.push((
                            fam,
                            "one GPU and no distributed code: there is no GPU-to-GPU traffic"
                                .into(),
                        ));
                    } else {
                        want.push(fam);
                    }
                }
            }
            Focus::Io => want.push(F::SyscallsIo),
            Focus::System => want.extend([
                F::CpuUtilization,
                F::ContextSwitches,
                F::SyscallsIo,
                F::CpuMemory,
            ]),
        }
    }
    if ctx.target.function.is_some() {
        want.push(F::BlockTiming);
    }
    if ctx.running && !ctx.launchable && want.contains(&F::AllocationSites) {
        want.retain(|w| *w != F::AllocationSites);
        not.push((
            F::AllocationSites,
            "the target is already running and allocation tracers (memray, tracemalloc) must start it: plan for its start command to get allocation sites".into(),
        ));
    }
    if ctx.outline.is_none() && !whole_machine && want.contains(&F::RedundantCopies) {
        want.retain(|w| *w != F::RedundantCopies);
        not.push((
            F::RedundantCopies,
            "only measurement code in the target sees duplicated tensors, and its source was not read (a running process or a framework): name the file to instrument".into(),
        ));
    }
    if whole_machine {
        for fam in [
            F::RedundantCopies,
            F::KernelLaunchOverhead,
            F::NcclCollectives,
            F::CommComputeRatio,
        ] {
            if want.contains(&fam) {
                want.retain(|w| *w != fam);
                not.push((
                    fam,
                    "needs a program to trace; only the machine was named".into(),
                ));
            }
        }
    }
    let mut seen = Vec::new();
    want.retain(|f| {
        if seen.contains(f) {
            false
        } else {
            seen.push(*f);
            true
        }
    });
    want.sort();
    not.retain(|(f, _)| !want.contains(f));
    not.sort_by_key(|(f, _)| *f);
    not.dedup_by_key(|(f, _)| *f);
    (want, not)
}

fn measure_families(m: Measure) -> &'static [MetricFamily] {
    use MetricFamily as F;
    match m {
        Measure::Timing => &[F::BlockTiming, F::CpuUtilization],
        Measure::CudaEvents => &[F::GpuUtilization, F::KernelLaunchOverhead],
        Measure::Transfers => &[F::HostDeviceTransfers, F::PeerTransfers],
        Measure::Memory => &[F::GpuMemory],
        Measure::Duplicates => &[F::RedundantCopies],
        Measure::Nccl => &[F::NcclCollectives, F::CommComputeRatio],
        Measure::Custom => &[],
    }
}

/// Instrumentation suggestions from the recipe's rules and the target's syntax tree.
fn suggest_instrumentation(
    ctx: &Context,
    recipe: &Recipe,
    focus: &[Focus],
    root: &Path,
) -> Vec<InstrumentSuggestion> {
    let mut out: Vec<InstrumentSuggestion> = Vec::new();
    let file = ctx
        .target
        .function
        .as_ref()
        .map(|f| f.path.clone())
        .or_else(|| ctx.target.script.as_ref().map(|s| s.path.clone()));
    let root = std::path::absolute(root).unwrap_or(root.to_path_buf());
    let under_root = |p: &str| Path::new(p).starts_with(&root);
    for rule in &recipe.instrument {
        if !rule.focus.is_empty() && !rule.focus.iter().any(|f| focus.contains(f)) {
            continue;
        }
        if ctx.holds(&rule.when).is_err() {
            continue;
        }
        let sites = sites_for(ctx, rule);
        if sites.is_empty() {
            if !rule.calls.is_empty()
                && ctx.outline.is_none()
                && ctx.python
                && ctx.target.kind != TargetKind::Focus
            {
                out.push(InstrumentSuggestion {
                    measure: rule.measure,
                    why: rule.why.clone(),
                    evidence: "the target's source was not read (a running process or a framework)".into(),
                    instrument_file: None,
                    todo: Some(format!(
                        "find the function that calls {} in the target's code, then call instrument_file on it",
                        rule.calls.iter().take(4).map(|c| format!("`{c}()`")).collect::<Vec<_>>().join(", ")
                    )),
                });
            }
            continue;
        }
        for (site, evidence) in sites {
            let Some(path) = file.clone() else { continue };
            if out.iter().any(|s| {
                s.measure == rule.measure
                    && s.instrument_file.as_ref().is_some_and(|i| {
                        i.function.as_deref() == site.function.as_deref() && i.lines == site.lines
                    })
            }) {
                continue;
            }
            // A runner wraps functions; a line range needs a marked `with` block.
            let strategy = match (&site.lines, rule.strategy) {
                (Some(_), system_profile_model::instrument::Strategy::Runner) => {
                    system_profile_model::instrument::Strategy::Context
                }
                (_, s) => s,
            };
            let input = InstrumentFileInput {
                path: path.clone(),
                measure: rule.measure,
                function: site.function,
                lines: site.lines,
                strategy,
                sample_every: rule.sample_every,
                sample_rate: None,
                snippet: None,
                dry_run: false,
                python: ctx
                    .target
                    .python
                    .as_ref()
                    .map(|p| p.executable.clone().unwrap_or_else(|| p.requested.clone())),
            };
            let (instrument_file, todo) = if under_root(&path) {
                (Some(input), None)
            } else {
                (
                    None,
                    Some(format!(
                        "{path} is outside the server's root ({}): instrument_file edits only files under it; start the server with --root above it",
                        root.display()
                    )),
                )
            };
            out.push(InstrumentSuggestion {
                measure: rule.measure,
                why: rule.why.clone(),
                evidence,
                instrument_file,
                todo,
            });
        }
    }
    out
}

struct Site {
    function: Option<String>,
    lines: Option<LineRange>,
}

/// Where a rule applies: the named function or block, or the functions calling its names
/// (innermost first, at most three).
fn sites_for(ctx: &Context, rule: &InstrumentRule) -> Vec<(Site, String)> {
    let func = ctx.target.function.as_ref();
    if rule.calls.is_empty() {
        return match func {
            Some(f) if f.def.is_some() => vec![(
                Site {
                    function: f.qualname.clone(),
                    lines: None,
                },
                format!(
                    "the target names `{}`",
                    f.qualname.clone().unwrap_or_default()
                ),
            )],
            Some(f) if f.start_line > 0 => vec![(
                Site {
                    function: None,
                    lines: Some(LineRange {
                        start: f.start_line,
                        end: f.end_line,
                    }),
                },
                format!("the target names lines {}-{}", f.start_line, f.end_line),
            )],
            _ => Vec::new(),
        };
    }
    let Some(outline) = ctx.outline else {
        return Vec::new();
    };
    let mut found: Vec<(u32, &system_profile_model::target::PythonDef, Vec<&String>)> = outline
        .defs
        .iter()
        .filter(|d| d.def_kind != "class")
        .filter(|d| {
            func.and_then(|f| f.qualname.as_ref())
                .is_none_or(|q| d.qualname == *q || d.qualname.starts_with(&format!("{q}.")))
        })
        .filter_map(|d| {
            let hits: Vec<&String> = rule
                .calls
                .iter()
                .filter(|c| d.notable_calls.contains(c))
                .collect();
            (!hits.is_empty()).then(|| (d.end_line - d.start_line, d, hits))
        })
        .collect();
    // Innermost first: a small function that does the work, not `main` that calls it.
    found.sort_by_key(|(span, d, _)| (*span, d.start_line));
    let mut chosen: Vec<(Site, String)> = Vec::new();
    let mut taken: Vec<&system_profile_model::target::PythonDef> = Vec::new();
    for (_, d, hits) in found {
        // Skip a def that encloses one already chosen: its calls are that one's.
        if taken
            .iter()
            .any(|t| d.start_line <= t.start_line && t.end_line <= d.end_line)
        {
            continue;
        }
        taken.push(d);
        chosen.push((
            Site {
                function: Some(d.qualname.clone()),
                lines: None,
            },
            format!(
                "`{}` (lines {}-{}) calls {}",
                d.qualname,
                d.start_line,
                d.end_line,
                hits.iter()
                    .map(|h| format!("`{h}()`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
        if chosen.len() == 3 {
            break;
        }
    }
    chosen
}

fn recipe_for<'r>(target: &Target, recipes: &'r Recipes, python: bool) -> Option<&'r Recipe> {
    if let Some(f) = &target.framework {
        if let Some(r) = recipes.get(&f.recipe) {
            return Some(r);
        }
    }
    recipes.generic_for(target.kind, python)
}

/// Plan the profile of `target` with what `detect` found.
pub fn plan(target: &Target, detect: &DetectReport, recipes: &Recipes, opts: &PlanOptions) -> Plan {
    let ctx = {
        let probe = Context::new(target, detect, &opts.root, None);
        let recipe = recipe_for(target, recipes, probe.python);
        Context::new(target, detect, &opts.root, recipe)
    };
    let detection = DetectionUsed {
        python: detect.python.requested.clone(),
        usable_tools: detect
            .tools
            .iter()
            .filter(|t| t.usable)
            .map(|t| t.id.clone())
            .collect(),
        gpus: ctx.gpu_count,
        cached: detect.cached,
        detected_at_unix_s: detect.detected_at_unix_s,
    };
    let mut plan = Plan {
        target: target.clone(),
        recipe: None,
        focus: Vec::new(),
        focus_source: String::new(),
        coverage: Vec::new(),
        steps: Vec::new(),
        skipped: Vec::new(),
        instrumentation: Vec::new(),
        estimated_wall_s: 0.0,
        time_budget_s: opts.time_budget_s,
        needs_clarification: target.needs_clarification,
        questions: target.questions.clone(),
        notes: Vec::new(),
        detection,
    };
    if target.needs_clarification {
        plan.notes.push(
            "the target is not resolved: ask the questions, then identify and plan again".into(),
        );
        return plan;
    }
    let Some(recipe) = recipe_for(target, recipes, ctx.python) else {
        plan.needs_clarification = true;
        plan.questions.push(format!(
            "No recipe serves a {:?} target. What should I profile?",
            target.kind
        ));
        return plan;
    };
    plan.recipe = Some(RecipeRef {
        id: recipe.id.clone(),
        name: recipe.name.clone(),
        file: format!("recipes/{}.toml", recipe.id),
        description: recipe.description.clone(),
    });
    let (mut focus, mut source) = if !opts.focus.is_empty() {
        (opts.focus.clone(), "given to plan_profile".to_string())
    } else if !target.focus.is_empty() {
        (target.focus.clone(), "named in the arguments".to_string())
    } else {
        (
            recipe.default_focus.clone(),
            format!("the default of the {} recipe", recipe.name),
        )
    };
    if opts.focus.is_empty()
        && target.focus.is_empty()
        && ctx.gpu_present
        && ctx.gpu_code()
        && !focus.contains(&Focus::Gpu)
    {
        focus.push(Focus::Gpu);
        source.push_str(&format!(
            ", and gpu: the code uses a GPU library and this machine has {} GPU(s)",
            ctx.gpu_count.max(1)
        ));
    }
    let mut dedup = Vec::new();
    for f in focus {
        if !dedup.contains(&f) {
            dedup.push(f);
        }
    }
    let focus = dedup;
    plan.focus = focus.clone();
    plan.focus_source = source;

    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let mut drafts = draft_steps(
        &ctx,
        opts.program_exists,
        recipe,
        &focus,
        &mut skipped,
        &mut notes,
    );

    // The same method on the same target twice measures the same thing twice; `measure` is
    // `time -v` with the /proc sampler, so it makes either of those redundant.
    let subsumes = |a: Method, b: Method| {
        a == b || (a == Method::Measure && matches!(b, Method::TimeV | Method::ProcfsSampler))
    };
    let mut unique: Vec<Draft> = Vec::new();
    for d in drafts.drain(..) {
        if unique.iter().any(|u| {
            subsumes(u.method, d.method) && u.run.target == d.run.target && u.run.env == d.run.env
        }) {
            continue;
        }
        unique.push(d);
    }
    let mut drafts = unique;

    let (families, not_applicable) = applicable_families(&ctx, &focus);
    let mut instrumentation = suggest_instrumentation(&ctx, recipe, &focus, &opts.root);
    if target.function.is_some() && !instrumentation.iter().any(|i| i.measure == Measure::Timing) {
        // A named function or block always gets its own wall and CPU time.
        let rule = InstrumentRule {
            measure: Measure::Timing,
            strategy: system_profile_model::instrument::Strategy::Runner,
            calls: Vec::new(),
            focus: Vec::new(),
            when: When::default(),
            why: "Wall and CPU time of the named function or block on every call (sampled), without editing the file.".into(),
            sample_every: None,
        };
        let timing_only = Recipe {
            instrument: vec![rule],
            ..recipe.clone()
        };
        instrumentation.extend(suggest_instrumentation(
            &ctx,
            &timing_only,
            &focus,
            &opts.root,
        ));
    }

    // Fill families no recipe step measures, from the catalog, lowest overhead first.
    for fam in &families {
        if drafts
            .iter()
            .any(|d| d.method.spec().families.contains(fam) || d.yields.contains(fam))
        {
            continue;
        }
        let mut candidates: Vec<Method> = Method::ALL
            .iter()
            .copied()
            .filter(|m| m.spec().families.contains(fam) && *m != Method::Custom)
            .collect();
        candidates.sort_by_key(|m| m.spec().overhead);
        let filler = Step {
            name: format!("{} (added: the recipe does not measure it)", family_name(*fam)),
            methods: candidates,
            per: Per::Target,
            components: Vec::new(),
            focus: Vec::new(),
            when: When::default(),
            why: format!(
                "Covers {}, which the {} recipe does not measure; the lowest-overhead method that can run here.",
                family_name(*fam),
                recipe.name
            ),
            options: ProfilerOptions::default(),
            duration_s: None,
            env: BTreeMap::new(),
            command: Vec::new(),
            alongside: None,
            notes: Vec::new(),
            yields: Vec::new(),
        };
        let fake = Recipe {
            steps: vec![filler],
            ..recipe.clone()
        };
        let mut filler_skips = Vec::new();
        let added = draft_steps(
            &ctx,
            opts.program_exists,
            &fake,
            &focus,
            &mut filler_skips,
            &mut notes,
        );
        if added.is_empty() {
            // Only fixable refusals say something the user can act on.
            skipped.extend(filler_skips.into_iter().filter(|s| s.fix.is_some()));
        }
        drafts.extend(added.into_iter().take(1));
    }

    // The budget: shorten observation windows, then drop the last steps that still do not fit.
    if let Some(budget) = opts.time_budget_s {
        let windowed: f64 = drafts
            .iter()
            .filter(|d| d.alongside_step.is_none())
            .filter_map(|d| d.run.duration_s)
            .sum();
        if windowed > budget {
            let scale = budget / windowed;
            for d in &mut drafts {
                if let Some(s) = d.run.duration_s.as_mut() {
                    *s = (*s * scale).max(MIN_WINDOW_S).round();
                }
            }
            notes.push(format!(
                "observation windows shortened to fit the {budget:.0} s budget (at least {MIN_WINDOW_S:.0} s each)"
            ));
        }
        let mut total = 0.0;
        let mut kept = Vec::new();
        for d in drafts {
            let cost = if d.alongside_step.is_some() {
                0.0
            } else {
                d.run.duration_s.unwrap_or(0.0)
            };
            if total + cost > budget && cost > 0.0 {
                skipped.push(SkippedMethod {
                    method: d.method,
                    tool: d.method.spec().tool.map(str::to_string),
                    step: d.recipe_step.clone(),
                    reason: format!(
                        "over the time budget: {:.0} s planned before it, {cost:.0} s more would pass {budget:.0} s",
                        total
                    ),
                    fix: Some("give a larger time_budget_s".into()),
                });
                continue;
            }
            total += cost;
            kept.push(d);
        }
        drafts = kept;
    }

    // Ids, alongside links and estimates.
    let ids: Vec<String> = (1..=drafts.len()).map(|i| format!("s{i}")).collect();
    let mut steps = Vec::new();
    let mut estimated = 0.0;
    let mut launches = 0;
    for (i, d) in drafts.iter().enumerate() {
        let spec = d.method.spec();
        let mut notes_here = d.notes.clone();
        let alongside = d.alongside_step.as_ref().and_then(|name| {
            drafts
                .iter()
                .position(|o| &o.recipe_step == name)
                .map(|j| ids[j].clone())
        });
        let mut run = d.run.clone();
        if d.alongside_step.is_some() && alongside.is_none() {
            notes_here.push(format!(
                "meant to run alongside `{}`, which is not in this plan: runs on its own",
                d.alongside_step.clone().unwrap_or_default()
            ));
            run.background = false;
        }
        if let Some(t) = ctx
            .detect
            .tools
            .iter()
            .find(|t| Some(t.id.as_str()) == spec.tool)
        {
            notes_here.extend(t.notes.iter().cloned());
        }
        let estimated_s = run.duration_s;
        if alongside.is_none() {
            match estimated_s {
                Some(s) => estimated += s,
                None if d.mode == TargetMode::Launch => launches += 1,
                None => {}
            }
        }
        steps.push(PlanStep {
            id: ids[i].clone(),
            method: d.method,
            tool: spec.tool.map(str::to_string),
            mode: d.mode,
            title: d.title.clone(),
            why: d.why.clone(),
            overhead: spec.overhead,
            overhead_note: spec.overhead_note.to_string(),
            families: {
                let mut f = spec.families.to_vec();
                f.extend(d.yields.iter().filter(|y| !spec.families.contains(y)));
                // Without a GPU a method sees nothing of one (torch_profiler records CPU
                // operators only): it covers no GPU family, and the plan must not say so.
                f.retain(|fam| !fam.needs_gpu() || ctx.gpu_present);
                f
            },
            artifacts: spec.artifacts.iter().map(|s| s.to_string()).collect(),
            metrics: spec.metrics.iter().map(|s| s.to_string()).collect(),
            estimated_s,
            alongside,
            instead_of: d.instead_of.clone(),
            notes: notes_here,
            run_profiler: run,
        });
    }
    if launches > 0 {
        notes.push(format!(
            "{launches} step(s) run the target once each; their time is the target's own run time (times the overhead), not counted in estimated_wall_s"
        ));
    }

    // Coverage.
    let mut coverage = Vec::new();
    for fam in &families {
        let by: Vec<String> = steps
            .iter()
            .filter(|s| s.families.contains(fam))
            .map(|s| s.id.clone())
            .collect();
        let by_instrumentation = (!fam.needs_gpu() || ctx.gpu_present)
            && instrumentation
                .iter()
                .any(|i| i.instrument_file.is_some() && measure_families(i.measure).contains(fam));
        let status = if !by.is_empty() {
            CoverageStatus::Covered
        } else if by_instrumentation {
            CoverageStatus::ByInstrumentation
        } else {
            CoverageStatus::Uncovered
        };
        let reason = (status == CoverageStatus::Uncovered).then(|| {
            let why: Vec<String> = Method::ALL
                .iter()
                .filter(|m| m.spec().families.contains(fam) && **m != Method::Custom)
                .filter_map(|m| {
                    skipped
                        .iter()
                        .find(|s| s.method == *m)
                        .map(|s| format!("{}: {}", m.id(), s.reason))
                })
                .collect();
            let methods: Vec<String> = Method::ALL
                .iter()
                .filter(|m| m.spec().families.contains(fam))
                .map(|m| m.id())
                .collect();
            let measures: Vec<&str> = [
                (Measure::Timing, "timing"),
                (Measure::CudaEvents, "cuda_events"),
                (Measure::Transfers, "transfers"),
                (Measure::Memory, "memory"),
                (Measure::Duplicates, "duplicates"),
                (Measure::Nccl, "nccl"),
            ]
            .iter()
            .filter(|(m, _)| measure_families(*m).contains(fam))
            .map(|(_, n)| *n)
            .collect();
            if why.is_empty() {
                let by_code = if measures.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; measurement code sees it (instrument_file measure {}) but none was placed{}",
                        measures.join(" or "),
                        if fam.needs_gpu() && !ctx.gpu_present { " (no GPU here)" } else { "" }
                    )
                };
                if methods.is_empty() {
                    format!("no profiler measures it{by_code}")
                } else {
                    format!(
                        "none of {} can run on this target here{by_code}",
                        methods.join(", ")
                    )
                }
            } else {
                let mut why = why;
                why.dedup();
                why.join("; ")
            }
        });
        coverage.push(FamilyCoverage {
            family: *fam,
            status,
            steps: by,
            reason,
        });
    }
    for (fam, why) in not_applicable {
        coverage.push(FamilyCoverage {
            family: fam,
            status: CoverageStatus::NotApplicable,
            steps: Vec::new(),
            reason: Some(why),
        });
    }
    let mut seen_skips: Vec<(Method, String)> = Vec::new();
    skipped.retain(|s| {
        let key = (s.method, s.reason.clone());
        if seen_skips.contains(&key) {
            false
        } else {
            seen_skips.push(key);
            true
        }
    });

    if steps.is_empty() {
        notes.push(
            "nothing in this plan can run here: see coverage and skipped for what is missing"
                .into(),
        );
    }
    plan.steps = steps;
    plan.skipped = skipped;
    plan.instrumentation = instrumentation;
    plan.coverage = coverage;
    plan.estimated_wall_s = estimated;
    plan.notes.extend(notes);
    plan
}

fn family_name(f: MetricFamily) -> String {
    serde_json::to_value(f)
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::version_at_least;

    #[test]
    fn versions_compare_numerically() {
        assert!(version_at_least("0.13.1", "0.13"));
        assert!(version_at_least("0.13", "0.13"));
        assert!(!version_at_least("0.9.2", "0.13"));
        assert!(version_at_least("2.8.0+cu128", "2.8"));
        assert!(!version_at_least("0.12.0rc1", "0.13"));
    }
}
