//! Holding a program at its start: a run whose observer attaches by PID (py-spy) must not
//! lose the program's first second to the observer's own start-up on a busy machine (the
//! truth corpus saw `json.tool`'s decoding cut from 35% to 24% of the samples that way).
//! The gate is `sh` waiting for one line on its stdin, then `exec`ing the program in the same
//! PID, so an observer started on the gate's PID is already running when Python starts.

use std::ffi::{OsStr, OsString};

/// The gate's `$0`: how it is found among a run's processes.
const GATE_NAME: &str = "system-profile-gate";

/// Wait for a line, then become the program, its stdin /dev/null as every run's is. `read`
/// failing (the supervisor gone) starts the program too: the supervisor's own end kills it.
const GATE_SCRIPT: &str = r#"read -r _; exec "$@" </dev/null"#;

/// `argv` behind the gate. Place it innermost (`perf stat -- time -v -- <gated program>`) so
/// the PID the gate gives is the program's.
pub fn gated<S: AsRef<OsStr>>(argv: &[S]) -> Vec<OsString> {
    let mut out: Vec<OsString> = ["/bin/sh", "-c", GATE_SCRIPT, GATE_NAME]
        .iter()
        .map(OsString::from)
        .collect();
    out.extend(argv.iter().map(|a| a.as_ref().to_os_string()));
    out
}

/// The PID of the gate among `root` and its descendants while it still waits: the process
/// whose command line is the gate's.
pub fn find_gate(root: u32) -> Option<u32> {
    let all = procfs::process::all_processes().ok()?;
    let mut parent_of = std::collections::HashMap::new();
    let mut gates = Vec::new();
    for p in all.flatten() {
        let Ok(stat) = p.stat() else { continue };
        parent_of.insert(stat.pid, stat.ppid);
        let is_gate = p
            .cmdline()
            .is_ok_and(|c| c.len() > 3 && c[2] == GATE_SCRIPT && c[3] == GATE_NAME);
        if is_gate {
            gates.push(stat.pid);
        }
    }
    let descends = |mut pid: i32| {
        for _ in 0..64 {
            if pid == root as i32 {
                return true;
            }
            match parent_of.get(&pid) {
                Some(&ppid) if ppid > 0 => pid = ppid,
                _ => return false,
            }
        }
        false
    };
    gates
        .into_iter()
        .find(|&pid| descends(pid))
        .and_then(|pid| u32::try_from(pid).ok())
}
