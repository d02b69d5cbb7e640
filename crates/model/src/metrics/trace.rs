//! Trace metrics: a torch.profiler (Kineto) trace's analysis and Nsight Systems' `nsys stats`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One GPU's time in a trace, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceDeviceTime {
    pub device: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// From the first GPU event's start to the last one's end.
    pub span_us: f64,
    /// Time with at least one kernel, copy or set running (overlaps counted once).
    pub busy_us: f64,
    pub idle_us: f64,
    pub idle_percent: f64,
    /// Sums of event durations by kind (overlapping streams counted each).
    pub kernel_us: f64,
    pub memcpy_us: f64,
    pub memset_us: f64,
    /// Time with an NCCL kernel running, time with another kernel running, and both at once.
    pub comm_us: f64,
    pub compute_us: f64,
    pub comm_compute_overlap_us: f64,
    /// Share of the communication time hidden under computation.
    pub comm_overlapped_percent: f64,
}

/// A kernel (by name) over the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceKernel {
    pub name: String,
    /// gemm, convolution, attention, nccl, elementwise, reduction, normalization, other.
    pub category: String,
    pub count: u64,
    pub total_us: f64,
    pub mean_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// Of all kernel time.
    pub percent: f64,
}

/// Kernel time of one category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceCategory {
    pub category: String,
    pub count: u64,
    pub total_us: f64,
    pub percent: f64,
}

/// Copies in one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceCopies {
    /// HtoD, DtoH, DtoD, PtoP (peer to peer), HtoH.
    pub direction: String,
    pub count: u64,
    pub bytes: u64,
    pub total_us: f64,
    /// bytes / total time, GB/s (10^9 bytes).
    pub bandwidth_gbps: f64,
    /// Counts by size: < 1 KiB, < 64 KiB, < 1 MiB, < 16 MiB, >= 16 MiB.
    pub size_buckets: Vec<u64>,
    /// Bytes of one copy, median and p95 (where each copy was seen: Kineto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_p50: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_p95: Option<u64>,
    /// Duration of one copy, median and p95, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us_p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us_p95: Option<f64>,
    /// Copies from or to pageable host memory (Kineto names them `Pageable`): each is staged
    /// through a pinned buffer by the driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pageable_count: Option<u64>,
    /// The bandwidth against the link it crossed (PCIe for HtoD/DtoH, NVLink for PtoP, device
    /// memory for DtoD), when the GPU model is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_peak: Option<crate::peaks::PeakUse>,
}

/// What launching kernels costs the CPU, against what the kernels take.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceLaunches {
    /// cudaLaunchKernel (and its variants) calls, and their summed CPU time.
    pub launches: u64,
    pub launch_api_us: f64,
    pub launch_api_mean_us: f64,
    /// Kernels, and their summed GPU time.
    pub kernels: u64,
    pub kernel_us: f64,
    /// Launch call start to kernel start, through the correlation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_to_start_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_to_start_p95_us: Option<f64>,
    /// Kernels shorter than 10 µs: where launch cost, not the GPU, sets the pace.
    pub short_kernels: u64,
    pub short_kernels_percent: f64,
}

/// Which GPU events the figures cover. With two `ProfilerStep#N` annotations or more, only
/// the work launched before the last step began (the last step is cut short when the profiler
/// stops): the window Holistic Trace Analysis uses, so the figures compare with its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceWindow {
    pub profiler_steps: u64,
    pub last_step_excluded: bool,
    /// Mean and longest profiler step, µs, over the steps that ran whole (not the last, which
    /// the profiler's stop cuts short): the step time the program would log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_max_us: Option<f64>,
    pub gpu_events_kept: u64,
    pub gpu_events_excluded: u64,
}

/// One Kineto (PyTorch profiler) trace, analysed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceAnalysis {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    pub events: u64,
    pub window: TraceWindow,
    pub devices: Vec<TraceDeviceTime>,
    pub categories: Vec<TraceCategory>,
    /// The kernels by total time, largest first (the first 50; the rest in `other_kernels`).
    pub kernels: Vec<TraceKernel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_kernels: Option<TraceCategory>,
    pub copies: Vec<TraceCopies>,
    pub launches: TraceLaunches,
    /// Collective communication (gloo or NCCL), when the trace has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collectives: Option<crate::collectives::Collectives>,
    /// torch's operators (and `record_function` labels) on the CPU by self time, as
    /// torch.profiler's own table counts them (the first 30).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_ops: Vec<CpuOp>,
    /// The collectives one by one, in this rank's clock, for lining up the ranks' clocks
    /// (`parse::kineto::align`); held while the traces are compared, never stored.
    #[serde(skip)]
    #[schemars(skip)]
    pub sync_points: Vec<crate::trace::SyncPoint>,
}

/// One operator on the CPU: its calls, its time less its children's (self) and with them
/// (total), µs, its share of all operators' self time, and the input shapes that took most of
/// its self time (with `record_shapes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuOp {
    pub name: String,
    pub calls: u64,
    pub self_us: f64,
    pub total_us: f64,
    pub self_percent: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapes: Vec<String>,
    /// Each of `shapes`' share of all operators' self time (torch's table grouped by input
    /// shape), in the same order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape_self_percent: Vec<f64>,
}

/// One row of an nsys API or OS runtime summary (cuda_api_sum, osrt_sum).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NsysCall {
    pub name: String,
    pub calls: u64,
    pub total_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
    /// nsys's `Time (%)`: share of the report's total.
    pub percent: f64,
}

/// One NVTX range of nvtx_sum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NsysRange {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<String>,
    pub instances: u64,
    pub total_us: f64,
    pub mean_us: f64,
}

/// `nsys stats` reports, read into the tables the Kineto analysis uses where they mean the
/// same (kernels, categories, copies, launches), plus the API, OS runtime and NVTX summaries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NsysStats {
    /// Reports read, by their nsys name (cuda_gpu_kern_sum, ...), and those nsys skipped.
    pub reports: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// From cuda_gpu_kern_sum; names as nsys printed them (it cuts long ones with `…`).
    pub kernels: Vec<TraceKernel>,
    pub categories: Vec<TraceCategory>,
    /// From cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum (nsys's MB are 10^6 bytes).
    pub copies: Vec<TraceCopies>,
    /// cudaLaunchKernel calls from cuda_api_sum against the kernels.
    pub launches: TraceLaunches,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuda_api: Vec<NsysCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os_runtime: Vec<NsysCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvtx: Vec<NsysRange>,
}

/// The steps a scheduled torch.profiler run traced, timed by the runner (torch_profiler with
/// `options.schedule`). Steps count from 1; step 1 holds the program's start-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepWindow {
    /// The first and last steps the trace holds.
    pub first_traced_step: u32,
    pub last_traced_step: u32,
    /// Steps the program made before it ended or was ended.
    pub steps_seen: u32,
    /// From the runner's start to the end of step 1: start-up and the first step.
    pub start_s: f64,
    /// What a step costs unprofiled: the median of the steps after the window (the profiler
    /// stopped), else of those before it woke (after step 1, often still warming up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unprofiled_step_s: Option<f64>,
    /// The mean traced step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced_step_s: Option<f64>,
    /// Whether the program was ended after the window.
    pub after_trace: crate::options::AfterTrace,
}

impl StepWindow {
    /// The window of the last traced cycle, from each step's wall (step 1 from the runner's
    /// start) and the schedule; `after_trace` is what happened, not what was asked. `None`
    /// when no cycle was traced or no step was timed.
    pub fn of(
        step_s: &[f64],
        schedule: &crate::options::TorchSchedule,
        cycles_traced: u32,
        after_trace: crate::options::AfterTrace,
    ) -> Option<StepWindow> {
        let cycle = schedule.wait + schedule.warmup + schedule.active.max(1);
        let last_cycle = cycles_traced.checked_sub(1)?;
        // Step k runs under the profiler's step number k - 1 (the count starts at 0 when the
        // profiler starts, with the program).
        let first_traced_step = last_cycle * cycle + schedule.wait + schedule.warmup + 1;
        let last_traced_step = (last_cycle + 1) * cycle;
        let steps_seen = u32::try_from(step_s.len()).unwrap_or(u32::MAX);
        let wall_s = |k: u32| -> Option<f64> {
            step_s
                .get(usize::try_from(k).ok()?.checked_sub(1)?)
                .copied()
        };
        let start_s = wall_s(1)?;
        let median = |mut v: Vec<f64>| -> Option<f64> {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        let unprofiled_step_s = median(
            (last_traced_step + 1..=steps_seen)
                .filter_map(wall_s)
                .collect(),
        )
        .or_else(|| median((2..=schedule.wait).filter_map(wall_s).collect()));
        let traced: Option<Vec<f64>> = (first_traced_step..=last_traced_step).map(wall_s).collect();
        let traced_step_s = traced
            .filter(|t| !t.is_empty())
            .map(|t| t.iter().sum::<f64>() / t.len() as f64);
        Some(StepWindow {
            first_traced_step,
            last_traced_step,
            steps_seen,
            start_s,
            unprofiled_step_s,
            traced_step_s,
            after_trace,
        })
    }

    /// How many times an unprofiled step a traced one took: the profiler's disturbance, read
    /// within the one run (a busy machine slows both alike).
    pub fn slowdown(&self) -> Option<f64> {
        Some(self.traced_step_s? / self.unprofiled_step_s?.max(1e-9))
    }

    /// The traced steps' wall together.
    pub fn traced_s(&self) -> Option<f64> {
        Some(self.traced_step_s? * f64::from(self.traced_steps()))
    }

    /// How many steps the window held.
    pub fn traced_steps(&self) -> u32 {
        self.last_traced_step + 1 - self.first_traced_step
    }

    /// About how many steps a whole run of `wall_s` makes: its start-up and first step as
    /// this run's, then unprofiled steps. At least the steps this run saw.
    pub fn steps_in_wall(&self, wall_s: f64) -> Option<f64> {
        let after_first = (wall_s - self.start_s).max(0.0) / self.unprofiled_step_s?.max(1e-9);
        Some((1.0 + after_first).max(f64::from(self.steps_seen)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{AfterTrace, TorchSchedule};

    #[test]
    fn a_window_is_timed_by_its_steps_and_the_unprofiled_ones_after_it() {
        // Start-up 3 s, steps warming up (0.4 s), then 0.2 s unprofiled and 0.25 s traced:
        // wait 3, warmup 1, active 3, two steps after the window, then ended.
        let steps = [3.0, 0.4, 0.4, 0.3, 0.25, 0.25, 0.25, 0.2, 0.2];
        let schedule = TorchSchedule {
            wait: 3,
            warmup: 1,
            active: 3,
            repeat: 1,
            after_trace: AfterTrace::EndProgram,
        };
        let w = StepWindow::of(&steps, &schedule, 1, AfterTrace::EndProgram).unwrap();
        assert_eq!(
            (w.first_traced_step, w.last_traced_step, w.steps_seen),
            (5, 7, 9)
        );
        assert!((w.start_s - 3.0).abs() < 1e-9);
        assert!((w.unprofiled_step_s.unwrap() - 0.2).abs() < 1e-9);
        assert!((w.traced_step_s.unwrap() - 0.25).abs() < 1e-9);
        assert!((w.slowdown().unwrap() - 1.25).abs() < 1e-9);
        assert!((w.traced_s().unwrap() - 0.75).abs() < 1e-9);
        // A whole run of 13 s: start-up, then 50 steps of 0.2 s.
        assert!((w.steps_in_wall(13.0).unwrap() - 51.0).abs() < 1e-9);
        assert!((w.steps_in_wall(1.0).unwrap() - 9.0).abs() < 1e-9);
        // No step after the window: the steps before the profiler woke, after step 1.
        let w = StepWindow::of(&steps[..7], &schedule, 1, AfterTrace::RunOn).unwrap();
        assert!((w.unprofiled_step_s.unwrap() - 0.4).abs() < 1e-9);
        // The second of two cycles, and no unprofiled step either side.
        let schedule = TorchSchedule {
            wait: 1,
            warmup: 0,
            active: 2,
            repeat: 2,
            after_trace: AfterTrace::RunOn,
        };
        let w = StepWindow::of(&steps[..6], &schedule, 2, AfterTrace::RunOn).unwrap();
        assert_eq!((w.first_traced_step, w.last_traced_step), (5, 6));
        assert_eq!(w.unprofiled_step_s, None);
        assert_eq!(w.slowdown(), None);
        // No cycle traced, or steps that do not reach the window's end.
        assert_eq!(
            StepWindow::of(&steps, &schedule, 0, AfterTrace::RunOn),
            None
        );
        let w = StepWindow::of(&steps[..5], &schedule, 2, AfterTrace::RunOn).unwrap();
        assert_eq!(w.traced_step_s, None);
    }
}
