//! The CPU table: one row per run that measured CPU time, what each row covers, and which
//! runs' figures belong in the tables at all.

use crate::session::Session;
use crate::tables::cite;
use system_profile_model::metrics::PerfStat;
use system_profile_model::report::{Coverage, CoverageScope, CpuRow};
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::RunRecord;

fn perf_counter(p: &PerfStat, names: &[&str]) -> Option<u64> {
    p.counters
        .iter()
        .find(|c| c.scope.is_none() && names.iter().any(|n| c.event.split(':').next() == Some(n)))
        .and_then(|c| c.value)
        .map(|v| v as u64)
}

fn per_s(count: Option<u64>, wall_s: Option<f64>) -> Option<f64> {
    match (count, wall_s) {
        (Some(c), Some(w)) if w > 0.0 => Some(c as f64 / w),
        _ => None,
    }
}

/// Whether a run's figures belong in the tables: a failed or cancelled run's are partial at
/// best and zeros at worst (the report's notes say why it is left out); a run stopped by its
/// timeout keeps what it measured until then.
pub fn measured(run: &RunRecord) -> bool {
    use system_profile_model::run::RunStatus;
    !matches!(run.status, RunStatus::Failed | RunStatus::Cancelled)
}

/// One row per run that measured CPU time (`time -v`, `perf stat`, the /proc sampler).
pub fn cpu_rows(session: &Session) -> Vec<CpuRow> {
    let mut rows = Vec::new();
    for run in session.runs.iter().filter(|r| measured(r)) {
        let m = &run.metrics;
        if m.time_v.is_none() && m.perf_stat.is_none() && m.procfs.is_none() {
            continue;
        }
        let mut row = CpuRow {
            run_id: run.run_id.clone(),
            ..CpuRow::default()
        };
        row.covers = coverage(run);
        if let Some(t) = &m.time_v {
            row.sources.push(cite(run, ArtifactKind::TimeV));
            row.wall_s = Some(t.wall_s);
            row.user_s = Some(t.user_s);
            row.sys_s = Some(t.sys_s);
            row.cpu_utilization_cores = t
                .cpu_utilization
                .or_else(|| (t.wall_s > 0.0).then(|| (t.user_s + t.sys_s) / t.wall_s));
            row.voluntary_ctx_switches = Some(t.voluntary_ctx_switches);
            row.involuntary_ctx_switches = Some(t.involuntary_ctx_switches);
            row.page_faults = Some(t.major_faults + t.minor_faults);
            row.major_faults = Some(t.major_faults);
            row.minor_faults = Some(t.minor_faults);
        }
        if let Some(p) = &m.perf_stat {
            row.sources.push(cite(run, ArtifactKind::PerfStatCsv));
            row.wall_s = row.wall_s.or(run.wall_s);
            row.cpu_utilization_cores = row.cpu_utilization_cores.or(p.cpus_utilized);
            // perf counts both kinds together: its own column, never the voluntary one.
            row.ctx_switches = perf_counter(p, &["context-switches", "cs"]);
            row.page_faults = row
                .page_faults
                .or(perf_counter(p, &["page-faults", "faults"]));
            row.major_faults = row.major_faults.or(perf_counter(p, &["major-faults"]));
            row.minor_faults = row.minor_faults.or(perf_counter(p, &["minor-faults"]));
            row.cpu_migrations = perf_counter(p, &["cpu-migrations", "migrations"]);
            row.ipc = p.ipc;
        }
        if let Some(s) = &m.procfs {
            row.sources.push(cite(run, ArtifactKind::ProcfsJsonl));
            row.wall_s = row.wall_s.or(Some(s.wall_s));
            row.user_s = row.user_s.or(Some(s.cpu_user_s));
            row.sys_s = row.sys_s.or(Some(s.cpu_sys_s));
            row.cpu_utilization_cores = row.cpu_utilization_cores.or(Some(s.cpu_utilization));
            row.voluntary_ctx_switches = row
                .voluntary_ctx_switches
                .or(Some(s.voluntary_ctx_switches));
            row.involuntary_ctx_switches = row
                .involuntary_ctx_switches
                .or(Some(s.involuntary_ctx_switches));
            row.run_queue_s = s.run_queue_s;
            row.run_queue_cores = s
                .run_queue_s
                .zip(row.wall_s)
                .and_then(|(q, w)| (w > 0.0).then(|| q / w));
        }
        row.voluntary_ctx_switches_per_s = per_s(row.voluntary_ctx_switches, row.wall_s);
        row.involuntary_ctx_switches_per_s = per_s(row.involuntary_ctx_switches, row.wall_s);
        row.cpu_utilization_of_machine_percent =
            match (row.cpu_utilization_cores, session.logical_cpus) {
                (Some(c), Some(n)) if n > 0 => Some(c / f64::from(n) * 100.0),
                _ => None,
            };
        rows.push(row);
    }
    rows
}

/// What a run's CPU figures cover, in the terms of its best source: `time -v` and perf on a
/// started command count the command and its children; perf attached by pid counts the
/// processes it attached to; the sampler counts the tree it followed.
pub fn coverage(run: &RunRecord) -> Coverage {
    use system_profile_model::run::RunTarget;
    let m = &run.metrics;
    let window = run
        .wall_s
        .or(m.procfs.as_ref().map(|p| p.wall_s))
        .map(|w| format!(", {w:.1} s"))
        .unwrap_or_default();
    let started = matches!(run.target, RunTarget::Command { .. });
    if let Some(p) = m.perf_stat.as_ref().filter(|p| !p.attached_pids.is_empty()) {
        if m.procfs.is_none() {
            let pids: Vec<String> = p.attached_pids.iter().take(8).map(u32::to_string).collect();
            let more = p.attached_pids.len().saturating_sub(8);
            return Coverage {
                scope: CoverageScope::Processes,
                processes: Some(p.attached_pids.len() as u32),
                text: format!(
                    "pid {}{} as they were at the start (every thread){window}",
                    pids.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
            };
        }
    }
    if let Some(s) = &m.procfs {
        let n = s.processes.len() as u32;
        let others = n.saturating_sub(1);
        // The ranks of one node of a distributed job: the row names it.
        let mut nodes: Vec<u32> = s.processes.iter().filter_map(|p| p.ids.node_rank).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let node = match nodes[..] {
            [n] => format!("node {n}: "),
            _ => String::new(),
        };
        return Coverage {
            scope: CoverageScope::Tree,
            processes: Some(n),
            text: match others {
                0 => format!(
                    "{node}pid {} (every thread; no child seen){window}",
                    s.root_pid
                ),
                _ => format!(
                    "{node}pid {} and {others} descendant(s) seen (every thread){window}",
                    s.root_pid
                ),
            },
        };
    }
    if let RunTarget::System { .. } = run.target {
        return Coverage {
            scope: CoverageScope::Machine,
            processes: None,
            text: format!("the whole machine{window}"),
        };
    }
    Coverage {
        scope: CoverageScope::Tree,
        processes: None,
        text: if started {
            format!("the command and every child it waited for (every thread){window}")
        } else {
            format!("the target's tree{window}")
        },
    }
}
