//! Observers that share one run: the program runs once for every method that can watch it
//! from outside without changing it or each other's figures.

use super::*;

/// A `measure` draft that starts the target takes the drafts of the same start that only
/// observe (`Method::OBSERVERS`: py-spy by PID, perf stat counting) as its observers; they
/// leave the plan as steps of their own. Methods that change the program (memray,
/// tracemalloc, cProfile, torch.profiler) keep runs of their own.
pub(super) fn observe_together(ctx: &Context, drafts: Vec<Draft>) -> Vec<Draft> {
    let Some(host_at) = drafts.iter().position(|d| {
        d.method == Method::Measure && d.mode == TargetMode::Launch && !d.run.background
    }) else {
        return drafts;
    };
    let mut host = drafts[host_at].clone();
    let mut kept: Vec<Option<Draft>> = Vec::new();
    for (i, d) in drafts.into_iter().enumerate() {
        if i != host_at && can_join(ctx, &host, &d) {
            join(&mut host, d);
        } else {
            kept.push((i != host_at).then_some(d));
        }
    }
    // The host stays where it was, now with its observers.
    kept.into_iter()
        .map(|d| d.unwrap_or_else(|| host.clone()))
        .collect()
}

fn can_join(ctx: &Context, host: &Draft, d: &Draft) -> bool {
    let (h, r) = (&host.run, &d.run);
    Method::OBSERVERS.contains(&d.method)
        && !host.run.options.observers.contains(&d.method)
        && d.mode == TargetMode::Launch
        && !r.background
        && d.alongside_step.is_none()
        && r.target == h.target
        && r.env == h.env
        && r.cwd == h.cwd
        && r.duration_s == h.duration_s
        // One rate for the /proc sampler and py-spy: a step asking for another runs apart.
        && r.options.rate_hz.unwrap_or(100.0) == h.options.rate_hz.unwrap_or(100.0)
        && r.options.subprocesses != Some(false)
        && (!d.method.spec().attaches_by_ptrace || ctx.detect.permissions.can_attach_to_pid)
}

fn join(host: &mut Draft, d: Draft) {
    let o = &d.run.options;
    let h = &mut host.run.options;
    h.observers.push(d.method);
    h.gil = h.gil.or(o.gil);
    h.idle = h.idle.or(o.idle);
    h.native = h.native.or(o.native);
    if h.events.is_empty() {
        h.events = o.events.clone();
    }
    for f in d.method.spec().families.iter().chain(&d.yields) {
        if !host.yields.contains(f) {
            host.yields.push(*f);
        }
    }
    // `measure on `cmd`` → `measure + py_spy_record on `cmd``.
    host.title = match host.title.find(" on `") {
        Some(at) => format!(
            "{} + {}{}",
            &host.title[..at],
            d.method.id(),
            &host.title[at..]
        ),
        None => format!("{} + {}", host.title, d.method.id()),
    };
    host.why = format!(
        "{} {} watches the same run from outside ({}), so the program runs once for both.",
        host.why,
        d.method.id(),
        match d.method {
            Method::PySpyRecord => "by PID",
            _ => "counting its process tree",
        }
    );
    host.notes.extend(d.notes);
}
