//! Child processes for system-profile. This crate owns how a program is started (argv, never a
//! shell string; env; cwd), how long it may run (timeout, then TERM to its whole process group,
//! then KILL after a grace period), and what is kept of its output (bounded tails in memory,
//! optionally the whole streams in files). It knows no profiler.

mod capture;
mod error;
#[cfg(unix)]
mod gate;
#[cfg(unix)]
mod group;
mod run;

pub use capture::Tail;
pub use error::{ExecError, ExecErrorKind};
#[cfg(unix)]
pub use group::{
    kill_all_runs, kill_runs_of, kill_runs_of_dead_servers, marked_servers, RUN_MARK_VAR,
};
mod watchdog;
#[cfg(unix)]
pub use gate::{find_gate, gated};
pub use run::{run, run_gated, run_observed, CommandSpec, ExitKind, Outcome, RunOptions};
pub use watchdog::{spawn_watchdog, watchdog_main, Watchdog, WATCHDOG_ARG};

/// Find `program` the way execvp would: a name with a slash is taken as a path, anything else is
/// looked up in `PATH`. Returns the first executable regular file.
pub fn which(program: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &std::path::Path| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.contains('/') {
        let p = std::path::PathBuf::from(program);
        return is_exec(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| is_exec(p))
}
