//! Runs one profiling method against a command or a PID, under supervision (`exec`), and turns
//! what it leaves into artifacts and typed metrics (`parse`, `sample`). It knows each method's
//! argv and files; it knows nothing of sessions, manifests or JSON-RPC (the engine does).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use system_profile_exec::{
    run, run_gated, run_observed, CommandSpec, ExecError, ExitKind, Outcome, RunOptions,
};
use system_profile_model::run::{
    ArtifactKind, Method, ProfilerOptions, RunMetrics, RunProfilerInput, RunStatus, RunTarget,
};
use system_profile_sample::gpu::GpuSeries;
use system_profile_sample::nvml::{NvmlSampler, NvmlSamplerConfig};
use system_profile_sample::sampler::{Sampler, SamplerConfig};

mod methods;
pub mod node;

pub use methods::IMPLEMENTED;
use methods::*;

/// Observation window of attach-mode methods when `duration_s` is not given.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(30);

/// Where and how one run happens.
#[derive(Debug, Clone, Default)]
pub struct RunPlace {
    /// The run's own folder (created by the caller); every artifact goes here.
    pub dir: PathBuf,
    /// Working directory of a started command.
    pub cwd: PathBuf,
    /// The run's id, given to every program it starts as `SP_RUN_ID`: the instrumentation
    /// helper writes it in each record, so one log shared by many runs splits by run.
    pub run_id: String,
    /// Samples the /proc sampler has taken so far, for progress reports.
    pub samples_taken: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// A file the run left, with its absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactFile {
    pub path: PathBuf,
    pub kind: ArtifactKind,
    pub bytes: u64,
}

/// What a finished run gives back.
#[derive(Debug, Clone)]
pub struct Execution {
    pub status: RunStatus,
    pub argv: Vec<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub wall_s: f64,
    pub artifacts: Vec<ArtifactFile>,
    pub metrics: RunMetrics,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub warnings: Vec<String>,
    pub error: Option<String>,
    /// The method measured nothing of the target: its own program could not start (its module
    /// is not installed for the target's interpreter), or the target ended before it could be
    /// read. A plan's pipeline runs the step's next method.
    pub not_started: Option<String>,
    /// Why it measured nothing, as a kind to act on (with `not_started`).
    pub error_kind: Option<RunErrorKind>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct RunError {
    kind: RunErrorKind,
    message: String,
}

pub use system_profile_model::run::RunErrorKind;

impl RunError {
    pub fn kind(&self) -> RunErrorKind {
        self.kind
    }

    fn new(kind: RunErrorKind, message: impl Into<String>) -> Self {
        RunError {
            kind,
            message: message.into(),
        }
    }
}

impl From<ExecError> for RunError {
    fn from(e: ExecError) -> Self {
        let kind = if e.is_not_found() {
            RunErrorKind::ToolUnavailable
        } else {
            RunErrorKind::Io
        };
        RunError::new(kind, e.to_string())
    }
}

fn window(input: &RunProfilerInput) -> Duration {
    input
        .duration_s
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_WINDOW)
}

fn command_of(input: &RunProfilerInput) -> Result<Vec<String>, RunError> {
    match &input.target {
        RunTarget::Command { command, shell } => {
            if command.is_empty() {
                return Err(RunError::new(
                    RunErrorKind::BadTarget,
                    "target.command is empty: give the argv to run",
                ));
            }
            Ok(if *shell {
                vec!["/bin/sh".into(), "-c".into(), command.join(" ")]
            } else {
                command.clone()
            })
        }
        RunTarget::Pid { pid } => Err(RunError::new(
            RunErrorKind::BadTarget,
            format!(
                "{} starts the target itself and cannot attach to PID {pid}: give target.command, or use procfs_sampler, strace_c or perf_stat, which attach",
                input.profiler.id()
            ),
        )),
        RunTarget::System { .. } => Err(RunError::new(
            RunErrorKind::BadTarget,
            format!(
                "{} needs a command to run, not the whole machine",
                input.profiler.id()
            ),
        )),
        RunTarget::Identified { target_id } => Err(unresolved(target_id)),
        RunTarget::SlurmJob { slurm_job } => Err(on_a_cluster_job(input, slurm_job)),
        RunTarget::RayJob { ray_job } => Err(on_a_cluster_job(input, ray_job)),
    }
}

/// The PID a method that only reads a running process is given; `what` says what it reads
/// there, for the error when it was given something else.
fn running_pid(input: &RunProfilerInput, what: &str) -> Result<u32, RunError> {
    match input.target {
        RunTarget::Pid { pid } => Ok(pid),
        _ => Err(RunError::new(
            RunErrorKind::BadTarget,
            format!("{} {what}: give target.pid", input.profiler.id()),
        )),
    }
}

/// A method of this machine given a cluster job: its nodes are reached by `cluster_nodes`.
fn on_a_cluster_job(input: &RunProfilerInput, job: &str) -> RunError {
    RunError::new(
        RunErrorKind::BadTarget,
        format!(
            "{} runs on this machine; cluster job `{job}`'s processes are on its nodes: run cluster_nodes on it",
            input.profiler.id()
        ),
    )
}

/// A `target_id` reaching the runner: the server resolves it into a command or a PID first.
fn unresolved(target_id: &str) -> RunError {
    RunError::new(
        RunErrorKind::BadTarget,
        format!("target {target_id} was not resolved into a command or a PID: give target.command or target.pid"),
    )
}

/// Where `input`'s method writes its artifact of `kind`: the file its `MethodSpec` names, the
/// name the plan showed (a method that names a kind its spec lacks is a bug the drift test
/// finds).
fn artifact_path(input: &RunProfilerInput, place: &RunPlace, kind: ArtifactKind) -> PathBuf {
    let spec = input.profiler.spec();
    let file = spec
        .artifacts
        .iter()
        .find(|a| a.kind == kind)
        .map(|a| a.file);
    debug_assert!(file.is_some(), "{:?} has no {kind:?}", spec.method);
    place
        .dir
        .join(file.map_or_else(|| system_profile_model::wire_name(&kind), str::to_string))
}

/// The artifact of `kind` the method wrote where its spec says, if it did.
fn kept(input: &RunProfilerInput, place: &RunPlace, kind: ArtifactKind) -> Option<ArtifactFile> {
    file_artifact(artifact_path(input, place, kind), kind)
}

fn file_artifact(path: PathBuf, kind: ArtifactKind) -> Option<ArtifactFile> {
    let bytes = std::fs::metadata(&path).ok()?.len();
    Some(ArtifactFile { path, kind, bytes })
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// What a target's stdout and stderr may each take on disk unless `output_cap_bytes` says.
pub const DEFAULT_OUTPUT_CAP_BYTES: u64 = 1 << 30;

/// Supervise `argv` with the run's streams, env, cwd and timeout.
async fn launch(
    input: &RunProfilerInput,
    place: &RunPlace,
    argv: &[String],
    timeout: Option<Duration>,
    on_spawn: impl FnOnce(u32),
) -> Result<Outcome, RunError> {
    let (spec, opts) = supervision(input, place, argv, timeout);
    Ok(run_observed(&spec, &opts, on_spawn).await?)
}

/// `launch` of an argv holding a gate (`system_profile_exec::gated`): the program starts when
/// `hold` (given the root's PID) ends.
async fn launch_gated<F: std::future::Future<Output = ()>>(
    input: &RunProfilerInput,
    place: &RunPlace,
    argv: &[String],
    timeout: Option<Duration>,
    hold: impl FnOnce(u32) -> F,
) -> Result<Outcome, RunError> {
    let (spec, opts) = supervision(input, place, argv, timeout);
    Ok(run_gated(&spec, &opts, hold).await?)
}

/// The run's command and how it is supervised: its streams kept in the run's folder up to
/// `output_cap_bytes`, `SP_RUN_ID` set.
fn supervision(
    input: &RunProfilerInput,
    place: &RunPlace,
    argv: &[String],
    timeout: Option<Duration>,
) -> (CommandSpec, RunOptions) {
    let mut spec = spec_of(input, argv, &place.cwd);
    if !place.run_id.is_empty() {
        spec = spec.env("SP_RUN_ID", &place.run_id);
    }
    let opts = RunOptions {
        timeout,
        stdout_path: Some(place.dir.join("stdout.txt")),
        stderr_path: Some(place.dir.join("stderr.txt")),
        file_cap_bytes: input
            .options
            .output_cap_bytes
            .unwrap_or(DEFAULT_OUTPUT_CAP_BYTES),
        ..Default::default()
    };
    (spec, opts)
}

/// `argv` in `cwd` with the run's environment: every program a run starts, the target or a
/// helper (nvidia-smi, nsys stats), sees the same `env` and resolves its name on that `PATH`.
fn spec_of(input: &RunProfilerInput, argv: &[String], cwd: &Path) -> CommandSpec {
    let mut spec = CommandSpec::new(argv.iter().map(String::as_str)).cwd(cwd);
    for (k, v) in &input.env {
        spec = spec.env(k, v);
    }
    spec
}

/// The outcome of the supervised process as status, exit and tails.
fn finish(outcome: &Outcome, argv: Vec<String>, place: &RunPlace) -> Execution {
    let (status, exit_code, signal) = match outcome.exit {
        ExitKind::Exited { code: 0 } => (RunStatus::Completed, Some(0), None),
        ExitKind::Exited { code } => (RunStatus::Failed, Some(code), None),
        ExitKind::Signaled { signal } => (RunStatus::Failed, None, Some(signal)),
        ExitKind::TimedOut => (RunStatus::TimedOut, None, None),
    };
    let mut artifacts = Vec::new();
    artifacts.extend(file_artifact(
        place.dir.join("stdout.txt"),
        ArtifactKind::Stdout,
    ));
    artifacts.extend(file_artifact(
        place.dir.join("stderr.txt"),
        ArtifactKind::Stderr,
    ));
    let mut warnings = Vec::new();
    for (name, t) in [("stdout", &outcome.stdout), ("stderr", &outcome.stderr)] {
        let kept_on_disk = place.dir.join(format!("{name}.txt")).exists();
        if kept_on_disk && t.total_bytes() > t.file_bytes() {
            warnings.push(format!(
                "{name}.txt keeps the first {} of the {} bytes the target wrote (options.output_cap_bytes); the last ones are in {name}_tail",
                t.file_bytes(),
                t.total_bytes()
            ));
        }
    }
    if outcome.killed_leftovers {
        warnings.push(
            "processes the target left running in its group were killed when it ended".into(),
        );
    }
    Execution {
        status,
        argv,
        exit_code,
        signal,
        wall_s: outcome.wall.as_secs_f64(),
        artifacts,
        metrics: RunMetrics::default(),
        stdout_tail: outcome.stdout.text(),
        stderr_tail: outcome.stderr.text(),
        warnings,
        error: None,
        not_started: None,
        error_kind: None,
    }
}

fn timeout_of(input: &RunProfilerInput) -> Option<Duration> {
    input.timeout_s.map(Duration::from_secs_f64)
}

/// Say in the run why it failed when the target's exit explains it.
/// The last non-blank line a target wrote to stderr, shortened: usually why it failed (a
/// traceback's last line).
fn last_words(stderr_tail: &str) -> Option<String> {
    stderr_tail
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(300).collect())
}

fn explain_exit(e: &mut Execution) {
    if e.error.is_some() {
        // The method said why already (nothing traced, nothing kept).
        return;
    }
    match (e.status, e.exit_code, e.signal) {
        (RunStatus::Failed, Some(code), _) => {
            let said = last_words(&e.stderr_tail)
                .map(|l| format!(": it said `{l}`"))
                .unwrap_or_default();
            e.error = Some(format!(
                "the target exited with status {code}{said}; what was measured until then is kept (see stderr_tail)"
            ))
        }
        (RunStatus::Failed, _, Some(sig)) => {
            e.error = Some(format!(
                "the target was killed by signal {sig}; what was measured until then is kept"
            ))
        }
        (RunStatus::TimedOut, _, _) => {
            e.error = Some(
                "timeout_s passed: the run's process group was killed; what was measured until then is kept"
                    .into(),
            )
        }
        _ => {}
    }
}

/// When the method's module is missing for the target's interpreter (`python -m <module>`
/// said `No module named <module>`), the run did not start: say so, and how to install it.
fn module_missing(e: &mut Execution, module: &str, package: &str, python: &str) -> bool {
    // `python -m x` says `No module named x`; an `import x` says `No module named 'x'`.
    let said = |name: String| e.stderr_tail.contains(&format!("No module named {name}"));
    if !said(module.to_string()) && !said(format!("'{module}'")) {
        return false;
    }
    let why = format!("{package} is not installed for {python}");
    e.error = Some(format!("{why}: {python} -m pip install {package}"));
    e.not_started = Some(why);
    e.error_kind = Some(RunErrorKind::ToolUnavailable);
    true
}

/// The advice for a refused ptrace, found in a tool's stderr.
fn ptrace_refused(stderr: &str) -> Option<String> {
    let s = stderr.to_lowercase();
    (s.contains("permission denied") || s.contains("operation not permitted"))
        .then(|| "attaching was refused: run as root, set kernel.yama.ptrace_scope=0 (sysctl), or in a container add --cap-add=SYS_PTRACE".to_string())
}

/// Draw folded stacks as a flame graph SVG (inferno); `None` when there is nothing to draw.
fn flamegraph(folded: &str, title: &str, svg: &Path) -> Option<String> {
    if folded.trim().is_empty() {
        return None;
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    let file = std::fs::File::create(svg).ok()?;
    match inferno::flamegraph::from_lines(
        &mut options,
        folded.lines(),
        std::io::BufWriter::new(file),
    ) {
        Ok(()) => None,
        Err(e) => Some(format!("flame graph not drawn: {e}")),
    }
}

fn is_python(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    name.starts_with("python") || name.starts_with("pypy")
}

/// A Python command split where a profiler goes in: the interpreter with its own options
/// (`-u`, `-X dev`, `-W error`), then the script or `-m module` and their arguments.
fn split_python(input: &RunProfilerInput) -> Result<(Vec<String>, Vec<String>), RunError> {
    let target = command_of(input)?;
    let mut pos = 1;
    while let Some(a) = target.get(pos) {
        match a.as_str() {
            "-m" => break,
            "-X" | "-W" => pos += 2,
            o if o.starts_with('-') && o != "-c" => pos += 1,
            _ => break,
        }
    }
    let names_code = target
        .get(pos)
        .is_some_and(|a| a != "-c" && (a != "-m" || target.len() > pos + 1));
    if !is_python(&target[0]) || !names_code {
        return Err(RunError::new(
            RunErrorKind::BadTarget,
            format!(
                "{} runs Python code: the command must start with the interpreter and name a script or module (`python3 script.py [args]`, `python3 -m module [args]`), not `{}`",
                input.profiler.id(),
                target.join(" ")
            ),
        ));
    }
    let rest = target[pos..].to_vec();
    let mut interpreter = target;
    interpreter.truncate(pos);
    Ok((interpreter, rest))
}

/// Run `input` in `place`. The future can be dropped at any point: the run's process group
/// dies with it, and an attached sampler stops.
pub async fn execute(input: &RunProfilerInput, place: &RunPlace) -> Result<Execution, RunError> {
    if let RunTarget::Identified { target_id } = &input.target {
        return Err(unresolved(target_id));
    }
    std::fs::create_dir_all(&place.dir).map_err(|e| {
        RunError::new(
            RunErrorKind::Io,
            format!("cannot create {}: {e}", place.dir.display()),
        )
    })?;
    dispatch(input, place).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(argv: &[&str]) -> RunProfilerInput {
        RunProfilerInput {
            profiler: Method::Cprofile,
            target: RunTarget::Command {
                command: argv.iter().map(|s| s.to_string()).collect(),
                shell: false,
            },
            cwd: None,
            env: Default::default(),
            duration_s: None,
            timeout_s: None,
            options: Default::default(),
            label: None,
            background: false,
        }
    }

    #[test]
    fn python_commands_split_after_the_interpreter_options() {
        let split = |argv: &[&str]| split_python(&with(argv)).map_err(|e| e.to_string());
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            split(&["python3", "a.py", "-x"]),
            Ok((v(&["python3"]), v(&["a.py", "-x"])))
        );
        assert_eq!(
            split(&[
                "/usr/bin/python3.11",
                "-u",
                "-X",
                "dev",
                "-W",
                "error",
                "a.py"
            ]),
            Ok((
                v(&["/usr/bin/python3.11", "-u", "-X", "dev", "-W", "error"]),
                v(&["a.py"])
            ))
        );
        assert_eq!(
            split(&["python3", "-O", "-m", "pkg.mod", "--flag"]),
            Ok((v(&["python3", "-O"]), v(&["-m", "pkg.mod", "--flag"])))
        );
        for bad in [
            &["python3"][..],
            &["python3", "-c", "pass"],
            &["python3", "-m"],
            &["./tool", "a.py"],
        ] {
            let err = split(bad).unwrap_err();
            assert!(
                err.contains("must start with the interpreter"),
                "{bad:?}: {err}"
            );
        }
    }
}
