//! The options each method reads, from the recipe step and the target (the torch profiler's schedule only where the source makes an optimizer).

use super::*;

pub(super) fn options_for(ctx: &Context, method: Method, step: &Step) -> ProfilerOptions {
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
pub(super) const OPTIMIZER_CALLS: [&str; 15] = [
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
pub(super) fn steps_an_optimizer(ctx: &Context) -> Option<bool> {
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
