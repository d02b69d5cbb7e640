//! The machine: /proc/cpuinfo, /sys/devices/system/node (NUMA), /proc/meminfo, uname.

use super::procfs::{parse_cpuinfo, parse_meminfo};
use super::read_trimmed;
use system_profile_model::detect::{CpuInfo, GpuEnvironment, Hardware, MemoryInfo, NumaNode};

/// Hardware with nothing known, for when the reader itself failed.
pub fn unknown() -> Hardware {
    Hardware {
        hostname: String::new(),
        kernel: String::new(),
        cpu: CpuInfo::default(),
        numa_nodes: Vec::new(),
        memory: MemoryInfo::default(),
        gpu: no_gpu("not probed"),
    }
}

pub fn no_gpu(reason: &str) -> GpuEnvironment {
    GpuEnvironment {
        nvml_available: false,
        driver_version: None,
        cuda_driver_version: None,
        reason: Some(reason.to_string()),
        gpus: Vec::new(),
        topology: None,
    }
}

/// Read CPU, NUMA and memory. GPUs are filled in by the GPU probe.
pub fn read() -> Hardware {
    let mut cpu = parse_cpuinfo(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default());
    cpu.affinity_cpus = affinity_cpus().unwrap_or(cpu.logical_cpus);
    Hardware {
        hostname: read_trimmed("/proc/sys/kernel/hostname").unwrap_or_default(),
        kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
        cpu,
        numa_nodes: numa_nodes(),
        memory: parse_meminfo(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default()),
        gpu: no_gpu("not probed"),
    }
}

/// CPUs this process may run on: `Cpus_allowed_list` of /proc/self/status.
fn affinity_cpus() -> Option<usize> {
    let ranges = procfs::process::Process::myself()
        .ok()?
        .status()
        .ok()?
        .cpus_allowed_list?;
    Some(ranges.iter().map(|(lo, hi)| (hi - lo + 1) as usize).sum())
}

/// NUMA nodes from /sys/devices/system/node/node*/cpulist and meminfo (`Node N MemTotal: kB`).
fn numa_nodes() -> Vec<NumaNode> {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/node") else {
        return Vec::new();
    };
    let mut nodes: Vec<NumaNode> = dir
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let id: u32 = name.strip_prefix("node")?.parse().ok()?;
            let base = format!("/sys/devices/system/node/{name}");
            let memory_total_bytes = std::fs::read_to_string(format!("{base}/meminfo"))
                .ok()
                .and_then(|text| {
                    text.lines().find_map(|l| {
                        let (_, rest) = l.split_once("MemTotal:")?;
                        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
                        Some(kb * 1024)
                    })
                });
            Some(NumaNode {
                id,
                cpulist: read_trimmed(&format!("{base}/cpulist")).unwrap_or_default(),
                memory_total_bytes,
            })
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Cpus_allowed_list` as `procfs` reads it counts what the kernel's affinity call says.
    #[test]
    fn affinity_agrees_with_sched_getaffinity() {
        // SAFETY: sched_getaffinity fills the zeroed set it is given, of the size passed.
        let expected = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            libc::CPU_COUNT(&set) as usize
        };
        assert_eq!(affinity_cpus(), Some(expected));
    }
}
