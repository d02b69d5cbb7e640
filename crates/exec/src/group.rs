//! Process-group signals. Every child is started as the leader of its own group, so one
//! signal to `-pgid` reaches everything it forked, including children that ignore SIGTERM.

/// Kills the whole group with SIGKILL when dropped while armed: a future that is aborted
/// (cancelled tool call, dropped task) leaves no process behind.
pub(crate) struct GroupGuard {
    pgid: i32,
    armed: bool,
}

impl GroupGuard {
    pub(crate) fn new(pgid: i32) -> Self {
        GroupGuard { pgid, armed: true }
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
