//! A server killed with SIGKILL (or by the OOM killer) runs no cleanup, and its runs' process
//! groups would outlive it. So a server starts a watchdog: its own binary with one hidden
//! argument, in a process group and session of its own (a Ctrl-C to the terminal does not
//! reach it), reading a pipe whose only write end the server holds (close-on-exec, so no
//! profiled child inherits it). When the server dies, however it dies, the kernel closes that
//! end; the watchdog reads EOF, kills every process carrying the server's run mark, and exits.
//!
//! Why not `PR_SET_PDEATHSIG` on each child: it fires when the *thread* that forked the child
//! exits, and the async runtime's threads come and go (a worker that blocked is retired), so
//! it would kill healthy runs. Why not a child subreaper: orphans reparented to the server
//! must then be reaped with `waitpid(-1)`, which would steal the runtime's own children's
//! exit statuses.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// The hidden first argument that makes the binary a watchdog.
pub const WATCHDOG_ARG: &str = "__watchdog";

/// The server's end of the pipe: dropping it (or dying) sets the watchdog off.
pub struct Watchdog {
    _write_end: OwnedFd,
    pub pid: u32,
}

/// Start the watchdog for this process: `program` is the server's own binary.
pub fn spawn_watchdog(program: &std::path::Path) -> std::io::Result<Watchdog> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut command = Command::new(program);
    command
        .arg(WATCHDOG_ARG)
        .arg(std::process::id().to_string())
        .stdin(Stdio::from(read_end))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = command.spawn()?;
    let pid = child.id();
    // The watchdog is waited for by nobody while the server lives; when the server exits it
    // is reparented and reaped by init. Dropping `Child` does not kill it.
    drop(child);
    Ok(Watchdog {
        _write_end: write_end,
        pid,
    })
}

/// The watchdog's whole life: wait for EOF on stdin, then end server `server_pid`'s runs.
pub fn watchdog_main(server_pid: u32) -> usize {
    // A session of its own already (set before exec); a hang-up or Ctrl-C meant for the
    // server must not end the watchdog before the server.
    // SAFETY: setting signal dispositions to SIG_IGN touches no memory.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    crate::group::kill_runs_of(server_pid)
}
