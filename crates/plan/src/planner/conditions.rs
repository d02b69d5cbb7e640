//! Steps worth their cost only when an earlier run shows what they are for: the cheapest
//! sufficient method first (issue 26). The pipeline reads the condition when that run ends.

use system_profile_model::plan::{PlanStep, RunCondition, RunsIf};
use system_profile_model::run::{Method, MetricFamily, TargetMode};

/// Under a focus the recipe chose (not one the user named), a step that only profiles
/// allocations (memray, tracemalloc: 3x to 5x the program, and their reports as much again)
/// runs after a `measure` of the same command only when that run shows memory worth it: a
/// program holding 20 MiB gets its memory table from the measure run, and the report says
/// how to ask for the sites anyway (`memory` in the target).
pub(super) fn allocation_profiles_when_memory_matters(steps: &mut [PlanStep]) {
    let allocation_only = |s: &PlanStep| {
        s.families.contains(&MetricFamily::AllocationSites)
            && s.families
                .iter()
                .all(|f| matches!(f, MetricFamily::AllocationSites | MetricFamily::CpuMemory))
    };
    for i in 0..steps.len() {
        if steps[i].mode != TargetMode::Launch
            || steps[i].run_profiler.background
            || !allocation_only(&steps[i])
        {
            continue;
        }
        let same_start = |m: &PlanStep| {
            let (a, b) = (&m.run_profiler, &steps[i].run_profiler);
            m.method == Method::Measure
                && m.mode == TargetMode::Launch
                && !a.background
                && a.target == b.target
                && a.env == b.env
                && a.cwd == b.cwd
        };
        if let Some(measure) = steps[..i].iter().find(|m| same_start(m)) {
            steps[i].runs_if = Some(RunsIf {
                after_step: measure.id.clone(),
                condition: RunCondition::MemoryMatters,
            });
        }
    }
}
