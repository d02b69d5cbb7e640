//! Whether we run in a container, and its limits: /.dockerenv, /run/.containerenv,
//! /proc/1/cgroup, the `container` environment variable, KUBERNETES_SERVICE_HOST; cgroup v2
//! (/sys/fs/cgroup/{memory.max,cpu.max,pids.max}: bytes, quota/period µs, count) or v1
//! (memory.limit_in_bytes bytes, cpu.cfs_quota_us / cpu.cfs_period_us µs, pids.max).

use super::{read_i64, read_trimmed};
use system_profile_model::detect::ContainerInfo;

/// v1 reports "no limit" as a huge page-aligned number.
const V1_UNLIMITED: u64 = 1 << 60;

pub fn read() -> ContainerInfo {
    let mut info = ContainerInfo::default();
    if std::path::Path::new("/.dockerenv").exists() {
        info.evidence.push("/.dockerenv exists".into());
        info.runtime.get_or_insert("docker".into());
    }
    if std::path::Path::new("/run/.containerenv").exists() {
        info.evidence.push("/run/.containerenv exists".into());
        info.runtime.get_or_insert("podman".into());
    }
    if let Ok(v) = std::env::var("container") {
        info.evidence
            .push(format!("container={v} in the environment"));
        info.runtime.get_or_insert(v);
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        info.evidence
            .push("KUBERNETES_SERVICE_HOST in the environment".into());
        info.runtime = Some("kubernetes".into());
    }
    let init_cgroups: Vec<String> = procfs::process::Process::new(1)
        .and_then(|init| init.cgroups())
        .map(|cgs| cgs.into_iter().map(|cg| cg.pathname).collect())
        .unwrap_or_default();
    if !init_cgroups.is_empty() {
        for word in ["docker", "kubepods", "libpod", "lxc", "containerd"] {
            if init_cgroups.iter().any(|path| path.contains(word)) {
                info.evidence
                    .push(format!("/proc/1/cgroup mentions {word}"));
                info.runtime.get_or_insert(word.into());
                break;
            }
        }
    }
    info.in_container = !info.evidence.is_empty();

    if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        info.cgroup_version = Some(2);
        info.memory_limit_bytes =
            read_trimmed("/sys/fs/cgroup/memory.max").and_then(|s| s.parse().ok());
        info.cpu_limit_cores = read_trimmed("/sys/fs/cgroup/cpu.max").and_then(|s| {
            let mut it = s.split_whitespace();
            let quota: f64 = it.next()?.parse().ok()?;
            let period: f64 = it.next()?.parse().ok()?;
            (period > 0.0).then(|| quota / period)
        });
        info.pids_limit = read_trimmed("/sys/fs/cgroup/pids.max").and_then(|s| s.parse().ok());
    } else if std::path::Path::new("/sys/fs/cgroup/memory").exists() {
        info.cgroup_version = Some(1);
        info.memory_limit_bytes = read_i64("/sys/fs/cgroup/memory/memory.limit_in_bytes")
            .map(|v| v as u64)
            .filter(|&v| v < V1_UNLIMITED);
        let quota = read_i64("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
        let period = read_i64("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
        if let (Some(q), Some(p)) = (quota, period) {
            if q > 0 && p > 0 {
                info.cpu_limit_cores = Some(q as f64 / p as f64);
            }
        }
        info.pids_limit = read_trimmed("/sys/fs/cgroup/pids/pids.max").and_then(|s| s.parse().ok());
    }
    info
}
