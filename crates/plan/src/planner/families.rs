//! Which metric families apply to a target and focus, and their names.

use super::*;

/// The families a focus asks for on this target, and those ruled out with the reason.
pub(super) fn applicable_families(
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

pub(super) fn family_name(f: MetricFamily) -> String {
    serde_json::to_value(f)
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
        .unwrap_or_default()
}
