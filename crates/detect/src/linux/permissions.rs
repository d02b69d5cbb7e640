//! What the kernel lets profilers do: /proc/sys/kernel/{perf_event_paranoid,yama/ptrace_scope,
//! kptr_restrict}, the effective capabilities in /proc/self/status (CapEff, a hex bit mask),
//! and the effective uid.

use super::read_i64;
use system_profile_model::detect::Permissions;

/// Capability bits that matter to profilers (linux/capability.h).
const CAPS: [(u32, &str); 4] = [
    (19, "CAP_SYS_PTRACE"),
    (21, "CAP_SYS_ADMIN"),
    (38, "CAP_PERFMON"),
    (39, "CAP_BPF"),
];

pub fn unknown() -> Permissions {
    Permissions {
        euid: u32::MAX,
        is_root: false,
        perf_event_paranoid: None,
        ptrace_scope: None,
        kptr_restrict: None,
        capabilities: Vec::new(),
        can_attach_to_pid: false,
        attach_advice: Some("permissions could not be read".into()),
    }
}

/// Names of the profiler-relevant capabilities set in a CapEff mask.
pub fn capabilities_from_mask(mask: u64) -> Vec<String> {
    CAPS.iter()
        .filter(|(bit, _)| mask & (1u64 << bit) != 0)
        .map(|(_, name)| name.to_string())
        .collect()
}

fn cap_eff() -> u64 {
    procfs::process::Process::myself()
        .and_then(|me| me.status())
        .map_or(0, |status| status.capeff)
}

pub fn read() -> Permissions {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let capabilities = capabilities_from_mask(cap_eff());
    let ptrace_scope = read_i64("/proc/sys/kernel/yama/ptrace_scope").map(|v| v as i32);
    let (can_attach_to_pid, attach_advice) = attach_rule(ptrace_scope, &capabilities);
    Permissions {
        euid,
        is_root: euid == 0,
        perf_event_paranoid: read_i64("/proc/sys/kernel/perf_event_paranoid").map(|v| v as i32),
        ptrace_scope,
        kptr_restrict: read_i64("/proc/sys/kernel/kptr_restrict").map(|v| v as i32),
        capabilities,
        can_attach_to_pid,
        attach_advice,
    }
}

/// Whether attaching to an arbitrary same-user PID (not a child) is allowed, and the fix when
/// it is not. Yama: 0 any same-uid process; 1 descendants only unless CAP_SYS_PTRACE; 2 only
/// with CAP_SYS_PTRACE; 3 never.
pub fn attach_rule(ptrace_scope: Option<i32>, caps: &[String]) -> (bool, Option<String>) {
    let has_ptrace = caps.iter().any(|c| c == "CAP_SYS_PTRACE");
    let container_hint = "in a container, run it with --cap-add SYS_PTRACE (docker) or securityContext.capabilities.add: [SYS_PTRACE] (Kubernetes)";
    match ptrace_scope {
        None | Some(0) => (true, None),
        Some(1) | Some(2) if has_ptrace => (true, None),
        Some(1) => (
            false,
            Some(format!(
                "ptrace_scope is 1: only descendants can be attached to. Run as root (sudo), or `sudo sysctl kernel.yama.ptrace_scope=0`; {container_hint}"
            )),
        ),
        Some(2) => (
            false,
            Some(format!(
                "ptrace_scope is 2: attaching needs CAP_SYS_PTRACE. Run as root (sudo); {container_hint}"
            )),
        ),
        Some(_) => (
            false,
            Some("ptrace_scope is 3: attaching is disabled until reboot; profile the program by launching it instead".into()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_from_mask() {
        // Full root mask as seen in this VM's containers.
        let caps = capabilities_from_mask(0x000001fffeffffff);
        assert_eq!(
            caps,
            ["CAP_SYS_PTRACE", "CAP_SYS_ADMIN", "CAP_PERFMON", "CAP_BPF"]
        );
        assert!(capabilities_from_mask(0).is_empty());
    }

    #[test]
    fn attach_rules() {
        let none: Vec<String> = vec![];
        let ptrace = vec!["CAP_SYS_PTRACE".to_string()];
        assert!(attach_rule(None, &none).0);
        assert!(attach_rule(Some(0), &none).0);
        assert!(!attach_rule(Some(1), &none).0);
        assert!(attach_rule(Some(1), &ptrace).0);
        assert!(attach_rule(Some(2), &ptrace).0);
        let (ok, advice) = attach_rule(Some(2), &none);
        assert!(!ok);
        assert!(advice.unwrap().contains("SYS_PTRACE"));
        assert!(!attach_rule(Some(3), &ptrace).0);
    }
}
