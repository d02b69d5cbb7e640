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
    // Each method's own defaults that depend on the target or the machine.
    match method {
        // The schedule advances on optimizer steps: without any it never starts.
        Method::TorchProfiler if steps_an_optimizer(ctx) == Some(false) => o.schedule = None,
        Method::Nsys if o.nsys_trace.is_empty() => {
            o.nsys_trace = vec!["cuda".into(), "nvtx".into(), "osrt".into()]
        }
        Method::NvidiaSmiDmon | Method::NvidiaSmiQuery => {
            o.interval_s = o.interval_s.or(o.rate_hz.map(|r| (1.0 / r).max(1.0)))
        }
        _ => {}
    }
    // The switches the target's words asked for, over the recipe's value.
    for asked in &ctx.target.asked_options {
        asked.set(&mut o);
    }
    // Options a method does not read are dropped so each step carries only its own: those
    // its spec lists.
    o = o.keep_only(method.spec().options);
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
