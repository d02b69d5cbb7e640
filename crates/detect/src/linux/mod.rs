//! Linux readers of /proc and /sys. Each function says what it reads and in which unit.

pub mod container;
pub mod hardware;
pub mod permissions;
pub mod procfs;

/// Read a small text file; `None` when absent or unreadable. For the sysctl files under
/// /proc/sys (hostname, osrelease, yama/ptrace_scope, perf_event_paranoid, kptr_restrict)
/// and cgroup files: `procfs` has no reader for them.
pub(crate) fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Read a file holding one integer.
pub(crate) fn read_i64(path: &str) -> Option<i64> {
    read_trimmed(path)?.parse().ok()
}
