//! Pure parsers of /proc text. They never fail: fields they cannot read stay at defaults.

use std::collections::BTreeSet;
use system_profile_model::detect::{CpuInfo, MemoryInfo};

/// /proc/cpuinfo: model name, vendor, sockets (distinct `physical id`), physical cores
/// (distinct (physical id, core id)), logical CPUs (`processor` entries), MHz of the first CPU,
/// and whether the `hypervisor` flag is set.
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut info = CpuInfo {
        architecture: std::env::consts::ARCH.to_string(),
        ..Default::default()
    };
    let mut sockets = BTreeSet::new();
    let mut cores = BTreeSet::new();
    let mut physical_id: Option<String> = None;
    for block in text.split("\n\n") {
        let mut has_processor = false;
        let mut core_id = None;
        for line in block.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            match key {
                "processor" => has_processor = true,
                "model name" | "Model" | "cpu model" if info.model_name.is_none() => {
                    info.model_name = Some(value.to_string())
                }
                "vendor_id" | "CPU implementer" if info.vendor.is_none() => {
                    info.vendor = Some(value.to_string())
                }
                "physical id" => physical_id = Some(value.to_string()),
                "core id" => core_id = Some(value.to_string()),
                "cpu MHz" if info.mhz.is_none() => info.mhz = value.parse().ok(),
                "flags" if value.split_whitespace().any(|f| f == "hypervisor") => {
                    info.virtualized = true
                }
                _ => {}
            }
        }
        if has_processor {
            info.logical_cpus += 1;
            let socket = physical_id.clone().unwrap_or_else(|| "0".into());
            sockets.insert(socket.clone());
            cores.insert((
                socket,
                core_id.unwrap_or_else(|| info.logical_cpus.to_string()),
            ));
        }
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

/// /proc/meminfo: MemTotal, MemAvailable, SwapTotal and Hugepagesize, converted from kB to
/// bytes.
pub fn parse_meminfo(text: &str) -> MemoryInfo {
    let mut mem = MemoryInfo::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(Ok(value)) = words.next().map(str::parse::<u64>) else {
            continue;
        };
        let bytes = match words.next() {
            Some("kB") => value * 1024,
            _ => value,
        };
        match key {
            "MemTotal" => mem.total_bytes = bytes,
            "MemAvailable" => mem.available_bytes = bytes,
            "SwapTotal" => mem.swap_total_bytes = bytes,
            "Hugepagesize" => mem.hugepage_size_bytes = Some(bytes),
            _ => {}
        }
    }
    mem
}

/// Count CPUs in a Linux cpulist (`0-3,8,10-11` is 7).
pub fn cpulist_len(list: &str) -> usize {
    list.trim()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|range| match range.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => usize::from(range.parse::<usize>().is_ok()),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulist_counts() {
        assert_eq!(cpulist_len("0-3,8,10-11"), 7);
        assert_eq!(cpulist_len("0"), 1);
        assert_eq!(cpulist_len(""), 0);
        assert_eq!(cpulist_len("garbage"), 0);
    }

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

    #[test]
    fn messy_input_gives_defaults() {
        let info = parse_cpuinfo("::::\n\nnot a cpuinfo");
        assert_eq!(info.logical_cpus, 0);
        let mem = parse_meminfo("MemTotal: lots kB\nnonsense");
        assert_eq!(mem.total_bytes, 0);
    }
}
