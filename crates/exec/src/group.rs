//! Process-group signals. Every child is started as the leader of its own group, so one
//! signal to `-pgid` reaches everything it forked, including children that ignore SIGTERM.

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable every child is started with, `<server pid>-<run number>`: a process that
/// leaves the group (`setsid`, a daemonising double fork) still carries it in its environment,
/// so it can be found and killed with its run (unless it rewrote its environment).
pub const RUN_MARK_VAR: &str = "SYSTEM_PROFILE_RUN";

static NEXT_MARK: AtomicU64 = AtomicU64::new(1);

/// A fresh mark for one child.
pub(crate) fn new_mark() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        NEXT_MARK.fetch_add(1, Ordering::Relaxed)
    )
}

/// The marks (`RUN_MARK_VAR`'s value) of the processes that carry one, by PID, read from
/// /proc/<pid>/environ through `procfs` (only our own user's processes are readable).
fn marked_processes() -> Vec<(u32, String)> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let key = std::ffi::OsStr::new(RUN_MARK_VAR);
    all.filter_map(|p| {
        let p = p.ok()?;
        let mark = p.environ().ok()?.remove(key)?;
        Some((
            u32::try_from(p.pid).ok()?,
            mark.to_string_lossy().into_owned(),
        ))
    })
    .collect()
}

/// SIGKILL every process whose environment holds `RUN_MARK_VAR=<mark>` exactly, or, with a
/// mark ending in `-`, any mark that starts so. Returns how many were killed.
pub(crate) fn kill_marked(mark: &str) -> usize {
    let prefix = mark.ends_with('-');
    let me = std::process::id();
    let mut killed = 0;
    for (pid, found) in marked_processes() {
        let hit = if prefix {
            found.starts_with(mark)
        } else {
            found == mark
        };
        if hit && pid != me {
            // SAFETY: kill(2) on a pid read from /proc; no memory is touched.
            if unsafe { libc::kill(pid as i32, libc::SIGKILL) } == 0 {
                killed += 1;
            }
        }
    }
    killed
}

/// Kill every process any run of this server started that is still alive, in or out of its
/// group: what the server does on its way out.
pub fn kill_all_runs() -> usize {
    kill_runs_of(std::process::id())
}

/// Kill every process carrying a mark of server `server_pid`, pass after pass until a pass
/// finds none (a process forking while a pass reads /proc is caught by the next), at most
/// 100 passes. Returns how many were killed.
pub fn kill_runs_of(server_pid: u32) -> usize {
    let prefix = format!("{server_pid}-");
    let mut killed = 0;
    for _ in 0..100 {
        let n = kill_marked(&prefix);
        killed += n;
        if n == 0 {
            break;
        }
    }
    killed
}

/// The servers whose marks live processes carry, with how many carry each.
pub fn marked_servers() -> std::collections::BTreeMap<u32, usize> {
    let mut out = std::collections::BTreeMap::new();
    for (_, mark) in marked_processes() {
        if let Some(server) = mark.split('-').next().and_then(|p| p.parse::<u32>().ok()) {
            *out.entry(server).or_insert(0) += 1;
        }
    }
    out
}

/// What a server that died without cleaning up (SIGKILL, OOM) left: processes carrying the
/// mark of a server pid that no longer exists. A starting server ends them; the marks say
/// they were ours, and a dead server can want none of them. Returns how many were killed.
pub fn kill_runs_of_dead_servers() -> usize {
    let mut killed = 0;
    for server in marked_servers().into_keys() {
        // SAFETY: signal 0 only checks for existence.
        let gone = unsafe { libc::kill(server as i32, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            killed += kill_runs_of(server);
        }
    }
    killed
}

/// Kills the whole group with SIGKILL when dropped while armed, and every process carrying the
/// child's mark: a future that is aborted (cancelled tool call, dropped task) leaves no process
/// behind.
pub(crate) struct GroupGuard {
    pgid: i32,
    mark: String,
    armed: bool,
}

impl GroupGuard {
    pub(crate) fn new(pgid: i32, mark: String) -> Self {
        GroupGuard {
            pgid,
            mark,
            armed: true,
        }
    }

    /// Kill what left the group but carries the mark; how many there were.
    pub(crate) fn kill_escaped(&self) -> usize {
        kill_marked(&self.mark)
    }

    pub(crate) fn signal(&self, sig: i32) {
        signal_group(self.pgid, sig);
    }

    /// The group is known to be gone; nothing to do on drop.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
            kill_marked(&self.mark);
        }
    }
}

pub(crate) fn signal_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

/// True while any process of the group is alive (kill with signal 0 succeeds).
pub(crate) fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(-pgid, 0) == 0 }
}
