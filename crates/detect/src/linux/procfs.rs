//! /proc text as the model's types, parsed by the `procfs` crate. They never fail: what
//! `procfs` cannot read stays at the defaults.

use std::collections::BTreeSet;
use system_profile_model::detect::{CpuInfo, MemoryInfo};

/// /proc/cpuinfo, read by `procfs`: model name, vendor, sockets (distinct `physical id`),
/// physical cores (distinct (physical id, core id)), logical CPUs (`processor` entries), MHz of
/// the first CPU, and whether the `hypervisor` flag is set. Text `procfs` cannot read gives
/// the defaults.
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    use procfs::FromBufRead;
    let mut info = CpuInfo {
        architecture: std::env::consts::ARCH.to_string(),
        ..Default::default()
    };
    let Ok(parsed) = procfs::CpuInfo::from_buf_read(text.as_bytes()) else {
        return info;
    };
    // x86 names these `model name` and `vendor_id`; Arm `Model`/`CPU implementer`, some
    // others `cpu model`: first one found, per CPU then the fields common to all.
    let field = |cpu: usize, keys: &[&str]| {
        keys.iter().find_map(|k| {
            parsed
                .get_field(cpu, k)
                .or_else(|| parsed.fields.get(*k).map(String::as_str))
                .map(str::to_string)
        })
    };
    let mut sockets = BTreeSet::new();
    let mut cores = BTreeSet::new();
    // A block without `processor` is not a CPU (procfs keeps whatever text it was given).
    for cpu in (0..parsed.num_cores()).filter(|c| parsed.get_field(*c, "processor").is_some()) {
        info.model_name = info
            .model_name
            .or_else(|| field(cpu, &["model name", "Model", "cpu model"]));
        info.vendor = info
            .vendor
            .or_else(|| field(cpu, &["vendor_id", "CPU implementer"]));
        if info.mhz.is_none() {
            info.mhz = field(cpu, &["cpu MHz"]).and_then(|m| m.parse().ok());
        }
        if field(cpu, &["flags"]).is_some_and(|f| f.split_whitespace().any(|f| f == "hypervisor")) {
            info.virtualized = true;
        }
        let socket = field(cpu, &["physical id"]).unwrap_or_else(|| "0".into());
        sockets.insert(socket.clone());
        cores.insert((
            socket,
            field(cpu, &["core id"]).unwrap_or_else(|| cpu.to_string()),
        ));
        info.logical_cpus += 1;
    }
    info.sockets = sockets.len().max(usize::from(info.logical_cpus > 0));
    info.physical_cores = cores.len();
    info.threads_per_core = info
        .logical_cpus
        .checked_div(info.physical_cores)
        .unwrap_or(1)
        .max(1);
    info
}

/// /proc/meminfo, read by `procfs` (kB as bytes): MemTotal, MemAvailable, SwapTotal and
/// Hugepagesize. Text `procfs` cannot read gives the defaults.
pub fn parse_meminfo(text: &str) -> MemoryInfo {
    use procfs::FromBufRead;
    match procfs::Meminfo::from_buf_read(text.as_bytes()) {
        Ok(m) => MemoryInfo {
            total_bytes: m.mem_total,
            available_bytes: m.mem_available.unwrap_or(0),
            swap_total_bytes: m.swap_total,
            hugepage_size_bytes: m.hugepagesize,
        },
        Err(_) => MemoryInfo::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_socket_hyperthreaded_cpuinfo() {
        let mut text = String::new();
        for cpu in 0..8 {
            let socket = cpu / 4;
            let core = (cpu % 4) / 2;
            text.push_str(&format!(
                "processor\t: {cpu}\nmodel name\t: Intel(R) Xeon(R)\nphysical id\t: {socket}\ncore id\t\t: {core}\nflags\t\t: fpu sse\n\n"
            ));
        }
        let info = parse_cpuinfo(&text);
        assert_eq!(info.logical_cpus, 8);
        assert_eq!(info.sockets, 2);
        assert_eq!(info.physical_cores, 4);
        assert_eq!(info.threads_per_core, 2);
        assert!(!info.virtualized);
    }

    /// This machine's own files against the kernel's counts from sysconf.
    #[test]
    fn this_machine_agrees_with_sysconf() {
        let cpu = parse_cpuinfo(&std::fs::read_to_string("/proc/cpuinfo").unwrap());
        // SAFETY: sysconf has no preconditions.
        let (cpus, pages, page) = unsafe {
            (
                libc::sysconf(libc::_SC_NPROCESSORS_CONF),
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        assert_eq!(cpu.logical_cpus as i64, cpus);
        assert!(cpu.model_name.is_some() || cfg!(not(target_arch = "x86_64")));
        let mem = parse_meminfo(&std::fs::read_to_string("/proc/meminfo").unwrap());
        let total = (pages as u64) * (page as u64);
        // MemTotal is the kernel's usable memory; the physical pages sysconf counts are it.
        let ratio = mem.total_bytes as f64 / total as f64;
        assert!(
            (0.99..1.01).contains(&ratio),
            "{} vs {total}",
            mem.total_bytes
        );
        assert!(mem.available_bytes > 0 && mem.available_bytes <= mem.total_bytes);
    }

    #[test]
    fn messy_input_gives_defaults() {
        let info = parse_cpuinfo("::::\n\nnot a cpuinfo");
        assert_eq!(info.logical_cpus, 0);
        let mem = parse_meminfo("MemTotal: lots kB\nnonsense");
        assert_eq!(mem.total_bytes, 0);
    }
}
