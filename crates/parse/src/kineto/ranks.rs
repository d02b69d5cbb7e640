//! The ranks of one job side by side: compute and communication time per rank, and who the
//! others wait for.

use system_profile_model::metrics::TraceAnalysis;
use system_profile_model::trace::{RankBalance, RankTime, TraceFile};

/// A straggler: the others' time in collectives exceeds its own by this share of theirs, and
/// by this share of the window (a difference that scheduling noise on a busy machine does not
/// make).
const STRAGGLER_WAIT_SHARE: f64 = 0.5;
const STRAGGLER_WINDOW_SHARE: f64 = 0.1;

/// Compute, communication and idle time of one rank: the GPU's (NCCL kernels against the
/// others) when the trace has GPU work, else the CPU's (gloo's collectives against the
/// busiest other thread).
fn times(a: &TraceAnalysis) -> (f64, f64, f64) {
    if !a.devices.is_empty() {
        let sum = |f: fn(&system_profile_model::metrics::TraceDeviceTime) -> f64| {
            a.devices.iter().fold(0.0, |acc, d| acc + f(d))
        };
        return (
            sum(|d| d.compute_us),
            sum(|d| d.comm_us),
            sum(|d| d.idle_us),
        );
    }
    match &a.collectives {
        Some(c) => (c.cpu_compute_us, c.cpu_comm_us, 0.0),
        None => (0.0, 0.0, 0.0),
    }
}

/// Each trace's rank: its own, unless one has none or two say the same (copies, or traces of
/// different jobs): then their order.
pub(super) fn rank_numbers(traces: &[TraceFile]) -> Vec<u32> {
    let said: Vec<Option<u32>> = traces.iter().map(|t| t.analysis.rank).collect();
    let mut seen = std::collections::HashSet::new();
    if said.iter().any(|r| r.is_none() || !seen.insert(*r)) {
        return (0..traces.len() as u32).collect();
    }
    said.into_iter().flatten().collect()
}

/// Compute and communication time per rank, and who the others wait for: a rank whose time
/// in collectives is well under the others' (they sit in every collective until it arrives),
/// or one computing more than 10% above the lower median while the others do wait for it.
pub fn rank_balance(traces: &[TraceFile]) -> Option<RankBalance> {
    if traces.len() < 2 {
        return None;
    }
    let ranks: Vec<RankTime> = traces
        .iter()
        .zip(rank_numbers(traces))
        .map(|(t, rank)| {
            let (compute_us, comm_us, idle_us) = times(&t.analysis);
            RankTime {
                rank,
                node_rank: t.node_rank,
                path: t.path.clone(),
                compute_us,
                comm_us,
                idle_us,
                step_mean_us: t.analysis.window.step_mean_us,
            }
        })
        .collect();
    // Traces with neither collectives nor timed compute say nothing about balance.
    if ranks
        .iter()
        .all(|r| r.compute_us == 0.0 && r.comm_us == 0.0)
    {
        return None;
    }
    let lower_median = |mut v: Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) / 2]
    };
    let compute: Vec<f64> = ranks.iter().map(|r| r.compute_us).collect();
    let median = lower_median(compute.clone());
    let lo = compute.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = compute.iter().copied().fold(0.0, f64::max);
    // The window the figures cover: the busiest rank's time.
    let window = ranks
        .iter()
        .map(|r| r.compute_us + r.comm_us + r.idle_us)
        .fold(0.0, f64::max);
    let mut stragglers = Vec::new();
    for r in &ranks {
        let others: Vec<f64> = ranks
            .iter()
            .filter(|o| o.rank != r.rank)
            .map(|o| o.comm_us)
            .collect();
        let waited = lower_median(others);
        // What the others spent in collectives beyond this rank: their wait for it, which
        // must be a real part of the window (scheduling noise on a busy machine is not).
        let gap = waited - r.comm_us;
        let waited_for = gap > 0.0 && gap >= STRAGGLER_WINDOW_SHARE * window;
        // Far less in collectives than the others, or computing longer while they wait: on a
        // busy machine a rank's operators also take longer while it is preempted.
        let far_less = gap >= STRAGGLER_WAIT_SHARE * waited;
        let computes_longer = median > 0.0 && r.compute_us > median * 1.1;
        if waited_for && (far_less || computes_longer) {
            stragglers.push(r.rank);
        }
    }
    stragglers.sort_unstable();
    Some(RankBalance {
        compute_imbalance: if lo > 0.0 { hi / lo } else { 0.0 },
        stragglers,
        ranks,
    })
}
