//! Run one child to completion under supervision.

use crate::capture::Tail;
use crate::error::{ExecError, ExecErrorKind};
use crate::group::{group_alive, GroupGuard};
use std::ffi::OsString;
use std::future::Future;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// What to run: an argv (never a shell string), environment changes and a working directory.
#[derive(Debug, Clone, Default)]
pub struct CommandSpec {
    pub argv: Vec<OsString>,
    /// Variables set on top of the inherited environment (or of an empty one, see `clear_env`).
    pub env: Vec<(OsString, OsString)>,
    pub env_remove: Vec<OsString>,
    pub clear_env: bool,
    pub cwd: Option<PathBuf>,
}

impl CommandSpec {
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        CommandSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    fn program(&self) -> String {
        self.argv
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// How to supervise it.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Wall-clock limit; `None` waits for ever.
    pub timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when the limit is reached.
    pub kill_grace: Duration,
    /// Bytes of each stream kept in memory (the end of it).
    pub tail_bytes: usize,
    /// Copy the whole stdout here as it arrives.
    pub stdout_path: Option<PathBuf>,
    /// Copy the whole stderr here as it arrives.
    pub stderr_path: Option<PathBuf>,
    /// Most bytes each stream's file receives; the rest is counted (and its end kept in the
    /// tail) but not written, so a program printing without end cannot fill the disk.
    pub file_cap_bytes: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            timeout: None,
            kill_grace: Duration::from_secs(2),
            tail_bytes: 64 * 1024,
            stdout_path: None,
            stderr_path: None,
            file_cap_bytes: u64::MAX,
        }
    }
}

impl RunOptions {
    pub fn with_timeout(timeout: Duration) -> Self {
        RunOptions {
            timeout: Some(timeout),
            ..Default::default()
        }
    }
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    /// The limit was reached and the group was killed.
    TimedOut,
}

impl ExitKind {
    pub fn success(self) -> bool {
        matches!(self, ExitKind::Exited { code: 0 })
    }
}

/// What a finished child left.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub pid: u32,
    pub exit: ExitKind,
    /// From the end of the wait at its gate (`run_gated`), or from its start.
    pub wall: Duration,
    /// How long it waited at its gate before its program started (zero for `run`).
    pub held: Duration,
    pub stdout: Tail,
    pub stderr: Tail,
    /// Processes of the group were still alive after the leader exited and were killed.
    pub killed_leftovers: bool,
}

impl Outcome {
    /// The first non-blank line the program printed (stdout, then stderr), trimmed: what a
    /// tool says when it refuses; `no output` when it said nothing.
    pub fn first_line(&self) -> String {
        let (out, err) = (self.stdout.text(), self.stderr.text());
        out.lines()
            .chain(err.lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output")
            .trim()
            .to_string()
    }
}

/// Start `spec`, supervise it as `opts` says, and return how it ended. The child leads its own
/// process group; when the future is dropped before the end, the whole group is killed.
pub async fn run(spec: &CommandSpec, opts: &RunOptions) -> Result<Outcome, ExecError> {
    run_observed(spec, opts, |_| {}).await
}

/// `run`, telling `on_spawn` the child's PID as soon as it exists (to attach samplers to it).
pub async fn run_observed(
    spec: &CommandSpec,
    opts: &RunOptions,
    on_spawn: impl FnOnce(u32),
) -> Result<Outcome, ExecError> {
    supervise(spec, opts, Start::AtOnce, |pid| {
        on_spawn(pid);
        std::future::ready(())
    })
    .await
}

/// `run` of an argv holding a gate (`crate::gated`): the child starts with a pipe for stdin,
/// `hold` gets its PID (to start observers on the gate), and when `hold` ends the gate is
/// opened. The wall time and the timeout count from then; `Outcome.held` is the wait.
pub async fn run_gated<F: Future<Output = ()>>(
    spec: &CommandSpec,
    opts: &RunOptions,
    hold: impl FnOnce(u32) -> F,
) -> Result<Outcome, ExecError> {
    supervise(spec, opts, Start::WhenReleased, hold).await
}

/// Whether the child runs at once or waits at its gate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    AtOnce,
    WhenReleased,
}

async fn supervise<F: Future<Output = ()>>(
    spec: &CommandSpec,
    opts: &RunOptions,
    start: Start,
    before: impl FnOnce(u32) -> F,
) -> Result<Outcome, ExecError> {
    let program = spec.program();
    let Some((first, rest)) = spec.argv.split_first() else {
        return Err(ExecError::new(ExecErrorKind::EmptyArgv));
    };
    let mut cmd = Command::new(first);
    cmd.args(rest)
        .stdin(match start {
            Start::AtOnce => Stdio::null(),
            Start::WhenReleased => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if spec.clear_env {
        cmd.env_clear();
    }
    for key in &spec.env_remove {
        cmd.env_remove(key);
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    let mark = crate::group::new_mark();
    cmd.env(crate::group::RUN_MARK_VAR, &mark);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }

    let spawned = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        ExecError::new(match e.kind() {
            std::io::ErrorKind::NotFound => ExecErrorKind::NotFound {
                program: program.clone(),
            },
            std::io::ErrorKind::PermissionDenied => ExecErrorKind::PermissionDenied {
                program: program.clone(),
            },
            _ => ExecErrorKind::Io {
                program: program.clone(),
                source: e,
            },
        })
    })?;
    let pid = child.id().unwrap_or(0);
    let mut guard = GroupGuard::new(pid as i32, mark);
    let gate = child.stdin.take();

    let out_reader = tokio::spawn(drain(
        child.stdout.take(),
        opts.tail_bytes,
        opts.stdout_path.clone(),
        opts.file_cap_bytes,
    ));
    let err_reader = tokio::spawn(drain(
        child.stderr.take(),
        opts.tail_bytes,
        opts.stderr_path.clone(),
        opts.file_cap_bytes,
    ));
    before(pid).await;
    if let Some(mut gate) = gate {
        // A gate that died first (its program missing) is seen at the wait below.
        let _ = gate.write_all(b"\n").await;
    }
    let held = spawned.elapsed();
    let started = Instant::now();

    let io_err = |source| {
        ExecError::new(ExecErrorKind::Io {
            program: program.clone(),
            source,
        })
    };
    let status = match opts.timeout {
        None => Some(child.wait().await.map_err(io_err)?),
        Some(limit) => match tokio::time::timeout(limit, child.wait()).await {
            Ok(status) => Some(status.map_err(io_err)?),
            Err(_) => None,
        },
    };
    let exit = match status {
        Some(status) => exit_kind(status),
        None => {
            guard.signal(libc::SIGTERM);
            if tokio::time::timeout(opts.kill_grace, child.wait())
                .await
                .is_err()
            {
                guard.signal(libc::SIGKILL);
                let _ = child.wait().await;
            }
            ExitKind::TimedOut
        }
    };
    let wall = started.elapsed();

    // Whatever the leader left behind in its group goes too: a profile run leaves no orphans.
    let mut killed_leftovers = group_alive(pid as i32);
    if killed_leftovers {
        guard.signal(libc::SIGKILL);
    }
    // And what left the group (setsid, a daemon's double fork) but still carries its mark.
    killed_leftovers |= guard.kill_escaped() > 0;
    guard.disarm();

    // A process that escaped the group (setsid) may still hold the pipes: do not wait for ever.
    let grace = Duration::from_secs(2);
    let stdout = join_reader(out_reader, grace, opts.tail_bytes).await;
    let stderr = join_reader(err_reader, grace, opts.tail_bytes).await;

    Ok(Outcome {
        pid,
        exit,
        wall,
        held: if start == Start::WhenReleased {
            held
        } else {
            Duration::ZERO
        },
        stdout,
        stderr,
        killed_leftovers,
    })
}

fn exit_kind(status: std::process::ExitStatus) -> ExitKind {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitKind::Exited { code },
        (None, Some(signal)) => ExitKind::Signaled { signal },
        (None, None) => ExitKind::Exited { code: -1 },
    }
}

async fn join_reader(handle: tokio::task::JoinHandle<Tail>, grace: Duration, limit: usize) -> Tail {
    let abort = handle.abort_handle();
    match tokio::time::timeout(grace, handle).await {
        Ok(Ok(tail)) => tail,
        _ => {
            abort.abort();
            Tail::new(limit)
        }
    }
}

async fn drain<R: AsyncRead + Unpin>(
    stream: Option<R>,
    limit: usize,
    copy_to: Option<PathBuf>,
    file_cap: u64,
) -> Tail {
    let mut tail = Tail::new(limit);
    let Some(mut stream) = stream else {
        return tail;
    };
    let mut file = match copy_to {
        // Never through a symlink someone placed at the name (O_NOFOLLOW): the run folder is
        // new, but the profiled program can write into it.
        Some(path) => tokio::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .await
            .ok(),
        None => None,
    };
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.push(&buf[..n]);
                if let Some(f) = file.as_mut() {
                    let room = file_cap.saturating_sub(tail.file_bytes());
                    let take = (n as u64).min(room) as usize;
                    if take > 0 {
                        if f.write_all(&buf[..take]).await.is_err() {
                            file = None;
                        } else {
                            tail.wrote_to_file(take as u64);
                        }
                    }
                }
            }
        }
    }
    if let Some(mut f) = file {
        let _ = f.flush().await;
    }
    tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Live (non-zombie) processes whose process group is `pgid`, read from /proc/*/stat.
    fn live_members(pgid: i32) -> Vec<u32> {
        procfs::process::all_processes()
            .unwrap()
            .filter_map(|p| p.ok()?.stat().ok())
            .filter(|s| s.state != 'Z' && s.pgrp == pgid)
            .map(|s| s.pid as u32)
            .collect()
    }

    fn sh(script: &str) -> CommandSpec {
        CommandSpec::new(["/bin/sh", "-c", script])
    }

    #[tokio::test]
    async fn captures_exit_code_and_streams() {
        let out = run(
            &sh("echo out; echo err >&2; exit 3"),
            &RunOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(out.exit, ExitKind::Exited { code: 3 });
        assert_eq!(out.stdout.text(), "out\n");
        assert_eq!(out.stderr.text(), "err\n");
    }

    #[tokio::test]
    async fn missing_program_is_not_found() {
        let err = run(
            &CommandSpec::new(["/nonexistent/definitely-not-here"]),
            &RunOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert!(err.to_string().contains("install it"));
    }

    #[tokio::test]
    async fn empty_argv_is_refused() {
        let err = run(&CommandSpec::default(), &RunOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(err.kind(), ExecErrorKind::EmptyArgv));
    }

    #[tokio::test]
    async fn timeout_kills_a_group_that_ignores_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pids");
        // Parent and a forked child both ignore TERM; only the group KILL ends them.
        let script = format!(
            "trap '' TERM; (trap '' TERM; echo $$ $(exec sh -c 'echo $PPID') >> {p}; sleep 30) & echo $$ >> {p}; sleep 30",
            p = pidfile.display()
        );
        let opts = RunOptions {
            timeout: Some(Duration::from_millis(300)),
            kill_grace: Duration::from_millis(200),
            ..Default::default()
        };
        let started = Instant::now();
        let out = run(&sh(&script), &opts).await.unwrap();
        assert_eq!(out.exit, ExitKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(5));
        // The group is gone: no member answers signal 0.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(live_members(out.pid as i32), Vec::<u32>::new());
    }

    #[tokio::test]
    async fn leftover_background_children_are_killed() {
        let out = run(&sh("sleep 30 & echo started"), &RunOptions::default())
            .await
            .unwrap();
        assert!(out.exit.success());
        assert!(out.killed_leftovers);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(live_members(out.pid as i32), Vec::<u32>::new());
    }

    #[tokio::test]
    async fn dropping_the_future_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let spec = sh(&format!(
            "echo $$ > {}; sleep 30 & sleep 30",
            pidfile.display()
        ));
        let opts = RunOptions::default();
        // Abandon the run after it has started, as a cancelled tool call does.
        let _ = tokio::time::timeout(Duration::from_millis(500), run(&spec, &opts)).await;
        let pgid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(live_members(pgid), Vec::<u32>::new());
    }

    /// Nanoseconds since the epoch, as `date +%s%N` prints them.
    fn epoch_ns() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    }

    #[tokio::test]
    async fn a_gated_program_starts_when_its_hold_ends_and_counts_from_then() {
        // The program prints when it started and what its stdin holds (nothing: /dev/null).
        let spec = CommandSpec::new(crate::gated(&[
            "/bin/sh",
            "-c",
            "date +%s%N; cat; echo end",
        ]));
        let mut released_ns = 0;
        let mut gate_seen = None;
        let out = run_gated(&spec, &RunOptions::default(), |pid| {
            let (released_ns, gate_seen) = (&mut released_ns, &mut gate_seen);
            async move {
                *gate_seen = crate::find_gate(pid);
                tokio::time::sleep(Duration::from_millis(400)).await;
                *released_ns = epoch_ns();
            }
        })
        .await
        .unwrap();
        assert!(out.exit.success(), "{out:?}");
        // The root is the gate while it waits, and the program in the same PID after.
        assert_eq!(gate_seen, Some(out.pid));
        let text = out.stdout.text();
        let mut lines = text.lines();
        let started_ns: u128 = lines.next().unwrap().parse().unwrap();
        assert!(
            started_ns >= released_ns,
            "started {started_ns} before {released_ns}"
        );
        assert_eq!(lines.next(), Some("end"), "{text:?}");
        assert!(out.held >= Duration::from_millis(400), "{:?}", out.held);
    }

    #[tokio::test]
    async fn a_gate_is_found_under_its_root_only() {
        let spec = CommandSpec::new(
            ["/bin/sh", "-c", "\"$@\"; exit 0", "outer"]
                .into_iter()
                .map(OsString::from)
                .chain(crate::gated(&["true"])),
        );
        let mut found = (None, None);
        let out = run_gated(&spec, &RunOptions::default(), |pid| {
            let found = &mut found;
            async move {
                let deadline = Instant::now() + Duration::from_secs(30);
                while found.0.is_none() && Instant::now() < deadline {
                    found.0 = crate::find_gate(pid);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                // Not under another process.
                found.1 = crate::find_gate(std::process::id() + 4_000_000);
            }
        })
        .await
        .unwrap();
        assert!(out.exit.success(), "{out:?}");
        let gate = found.0.expect("the gate under the outer shell");
        assert_ne!(gate, out.pid, "the gate is the outer shell's child");
        assert_eq!(found.1, None);
    }

    #[tokio::test]
    async fn whole_stream_goes_to_file_while_memory_keeps_a_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let opts = RunOptions {
            tail_bytes: 10,
            stdout_path: Some(path.clone()),
            ..Default::default()
        };
        let out = run(&sh("seq 1 10000"), &opts).await.unwrap();
        let file = std::fs::read_to_string(&path).unwrap();
        assert_eq!(file.lines().count(), 10000);
        assert_eq!(out.stdout.total_bytes(), file.len() as u64);
        assert_eq!(out.stdout.text(), "9999\n10000\n"[1..].to_string());
    }
}
