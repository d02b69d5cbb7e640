//! The engine: the six steps of `/system-profile` as one API over the other crates, with the
//! per-session state they share (the detection cache, the runs of this session). It knows
//! nothing of JSON-RPC or MCP; the `mcp` crate and the CLI both drive it.

pub mod pipeline;
pub use system_profile_exec::{watchdog_main, Watchdog, WATCHDOG_ARG};
mod run;
mod runs;
mod secrets;
mod tool_path;
mod trace_files;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use system_profile_detect::{detect, DetectOptions, DETECT_PARTS};
use system_profile_model::detect::{DetectReport, DetectToolsInput};
use system_profile_model::instrument::{
    ChangeList, InstrumentFileInput, InstrumentResult, ListChangesInput, RevertChangesInput,
    RevertResult,
};
use system_profile_model::plan::{Plan, PlanProfileInput, TargetSpec};
use system_profile_model::report::{CompareInput, CompareOutput, SummarizeInput, SummarizeOutput};
use system_profile_model::run::{
    CancelRunInput, GetRunInput, ListRunsInput, RunList, RunProfilerInput, RunRecord, RunStatus,
    RunTarget,
};
use system_profile_model::target::{IdentifyTargetInput, Target, TargetKind};
use system_profile_model::trace::ClockAlignment;
use system_profile_model::trace::{AnalyzeTraceInput, TraceReport};
use system_profile_parse::kineto::rank_balance;
use system_profile_plan::identify::{identify, IdentifyOptions};
use system_profile_plan::planner::{plan, PlanOptions};
use system_profile_plan::Recipes;
use trace_files::analyze_file;

/// Where `serve --listen` keeps its bearer token (never served as a resource).
pub const LISTEN_TOKEN_FILE: &str = "profile_output/.listen-token";

/// What the engine is configured with.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The root every path is resolved against; artifacts go under `<root>/profile_output/`.
    pub root: PathBuf,
    /// Interpreter used when a call names none.
    pub default_python: String,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            root: PathBuf::from("."),
            default_python: "python3".into(),
        }
    }
}

/// One step of a long call, for `notifications/progress`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    /// Work done so far; grows with every update of one call.
    pub progress: f64,
    /// Work in all, when known.
    pub total: Option<f64>,
    pub message: String,
}

/// Where a call reports its progress. `Progress::none()` when nobody listens.
#[derive(Clone, Default)]
pub struct Progress {
    sink: Option<Arc<dyn Fn(ProgressUpdate) + Send + Sync>>,
}

impl Progress {
    pub fn none() -> Self {
        Progress { sink: None }
    }

    pub fn to(sink: impl Fn(ProgressUpdate) + Send + Sync + 'static) -> Self {
        Progress {
            sink: Some(Arc::new(sink)),
        }
    }

    pub fn is_listening(&self) -> bool {
        self.sink.is_some()
    }

    pub fn report(&self, progress: f64, total: Option<f64>, message: impl Into<String>) {
        if let Some(sink) = &self.sink {
            sink(ProgressUpdate {
                progress,
                total,
                message: message.into(),
            });
        }
    }
}

/// A tool failure the caller can act on: it becomes `isError: true` with this message, or a
/// -32602 when it names a bad field.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("invalid `{field}`: {message}")]
    InvalidInput { field: String, message: String },
    /// The tool ran and could not do its job (a profiler missing, a run that failed to start).
    #[error("{message}")]
    Failed { message: String },
}

/// One server's engine. Cheap to share behind an `Arc`.
pub struct Engine {
    config: EngineConfig,
    /// `config.root`, absolute with links resolved: what every path is checked against.
    root: PathBuf,
    runs: Arc<runs::RunBook>,
    /// Detection per interpreter, for the life of the session; `refresh` replaces it.
    detect_cache: tokio::sync::Mutex<HashMap<String, Arc<DetectReport>>>,
    /// One ledger operation at a time in this server.
    ledger_lock: tokio::sync::Mutex<()>,
    /// Every target identified in this session, by `target_id`, so that a client passes
    /// the id on instead of the whole object.
    targets: std::sync::Mutex<Vec<Target>>,
}

/// The input's numbers within the bounds its schema states (`model::validate`: one statement
/// of each bound, the schema's).
fn in_range<T: schemars::JsonSchema + serde::Serialize>(input: &T) -> Result<(), EngineError> {
    system_profile_model::validate::check_ranges(input).map_err(|e| EngineError::InvalidInput {
        field: e.field,
        message: e.message,
    })
}

fn instrument_error(e: system_profile_instrument::InstrumentError) -> EngineError {
    use system_profile_instrument::InstrumentError as E;
    match e {
        E::Refused { field, message } => EngineError::InvalidInput {
            field: field.into(),
            message,
        },
        other => EngineError::Failed {
            message: other.to_string(),
        },
    }
}

fn report_error(e: system_profile_report::ReportError) -> EngineError {
    match e.kind() {
        system_profile_report::ReportErrorKind::InvalidInput { field } => {
            EngineError::InvalidInput {
                field: field.into(),
                message: e.to_string(),
            }
        }
        _ => EngineError::Failed {
            message: e.to_string(),
        },
    }
}

impl Engine {
    pub fn new(config: EngineConfig) -> Self {
        let root = config
            .root
            .canonicalize()
            .or_else(|_| std::path::absolute(&config.root))
            .unwrap_or(config.root.clone());
        Engine {
            runs: Arc::new(runs::RunBook::new(root.clone())),
            root,
            config,
            detect_cache: tokio::sync::Mutex::new(HashMap::new()),
            ledger_lock: tokio::sync::Mutex::new(()),
            targets: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Kill every process a run of this server started that is still alive, even one that
    /// left its process group: for the server's way out. Returns how many there were.
    pub fn kill_all_runs() -> usize {
        system_profile_exec::kill_all_runs()
    }

    /// Start the watchdog that ends this server's runs if it dies without cleaning up
    /// (`exec::watchdog`); keep the value for the server's life. `program` is the server's
    /// own binary.
    pub fn start_watchdog(
        program: &std::path::Path,
    ) -> std::io::Result<system_profile_exec::Watchdog> {
        system_profile_exec::spawn_watchdog(program)
    }

    /// End what servers that died without cleaning up left running (their marks name a pid
    /// that is gone). Returns how many processes were killed.
    pub fn end_orphans_of_dead_servers() -> usize {
        system_profile_exec::kill_runs_of_dead_servers()
    }

    /// Keep the listener's bearer token in `profile_output/.listen-token`, readable by the
    /// user only (written atomically, never through a symlink); returns its path.
    pub fn write_listen_token(&self, token: &str) -> std::io::Result<PathBuf> {
        let fs = self.runs.fs()?;
        system_profile_instrument::output_dir(&fs).map_err(std::io::Error::other)?;
        let rel = std::path::Path::new(LISTEN_TOKEN_FILE);
        system_profile_instrument::ledger::write_atomic(
            &fs,
            rel,
            &rel.with_extension("tmp"),
            format!("{token}\n").as_bytes(),
            0o600,
            None,
        )
        .map_err(std::io::Error::other)?;
        Ok(self.root.join(rel))
    }

    /// This engine's session: the folder under `profile_output/` its runs go to.
    pub fn session(&self) -> &str {
        self.runs.session()
    }

    /// The directory a call's relative paths resolve in: `cwd` against the root, which must
    /// exist and be a directory.
    fn resolve_cwd(&self, cwd: Option<&str>) -> Result<PathBuf, EngineError> {
        let dir = match cwd.map(str::trim) {
            None | Some("") => self.root.clone(),
            Some(c) => self.root.join(c),
        };
        if !dir.is_dir() {
            return Err(EngineError::InvalidInput {
                field: "cwd".into(),
                message: format!(
                    "{} is not a directory; give a directory that exists (relative to {})",
                    dir.display(),
                    self.root.display()
                ),
            });
        }
        // `..` and symlinks are followed before the check, so neither leads out of the root.
        let dir = dir.canonicalize().unwrap_or(dir);
        if !dir.starts_with(&self.root) {
            return Err(EngineError::InvalidInput {
                field: "cwd".into(),
                message: format!(
                    "{} is outside the server's root {}: start the server with --root above it",
                    dir.display(),
                    self.root.display()
                ),
            });
        }
        Ok(dir)
    }

    fn python_arg(&self, python: Option<&str>) -> Result<Option<String>, EngineError> {
        match python.map(str::trim) {
            Some("") => Err(EngineError::InvalidInput {
                field: "python".into(),
                message: "empty interpreter name; omit it for the default or give a path".into(),
            }),
            other => Ok(other.map(str::to_string)),
        }
    }

    /// Step 1: what the user's words name, resolved against this machine.
    pub async fn identify_target(&self, input: IdentifyTargetInput) -> Result<Target, EngineError> {
        // What a person types after a slash command; anything longer is not a target.
        const MAX_ARGUMENTS_BYTES: usize = 16 * 1024;
        if input.arguments.len() > MAX_ARGUMENTS_BYTES {
            return Err(EngineError::InvalidInput {
                field: "arguments".into(),
                message: format!(
                    "{} bytes; give at most {MAX_ARGUMENTS_BYTES}: a target and focus words, not a file's contents",
                    input.arguments.len()
                ),
            });
        }
        let opts = IdentifyOptions {
            cwd: self.resolve_cwd(input.cwd.as_deref())?,
            python: self.python_arg(input.python.as_deref())?,
            default_python: self.config.default_python.clone(),
            helper_timeout: Duration::from_secs(15),
        };
        let target = identify(&input.arguments, &opts, Recipes::builtin()).await;
        Ok(self.keep_target(target))
    }

    /// The target as this session keeps it: one it holds already keeps its id; any other (a
    /// new one, or a whole target from another session whose id may name something else
    /// here) gets the next id.
    fn keep_target(&self, mut target: Target) -> Target {
        let mut kept = self.targets.lock().unwrap_or_else(|p| p.into_inner());
        if target.target_id.is_some() && kept.contains(&target) {
            return target;
        }
        target.target_id = Some(format!("t{}", kept.len() + 1));
        kept.push(target.clone());
        target
    }

    /// A target this session identified, by its id.
    fn target_by_id(&self, id: &str) -> Result<Target, EngineError> {
        let kept = self.targets.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter()
            .find(|t| t.target_id.as_deref() == Some(id.trim()))
            .cloned()
            .ok_or_else(|| EngineError::InvalidInput {
                field: "target_id".into(),
                message: format!(
                    "no target `{id}` in this session ({} identified); call identify_target, or pass `target`",
                    kept.len()
                ),
            })
    }

    /// Step 2: an ordered plan for a target (identified first when given as raw arguments),
    /// from its recipe and the tools detected for its interpreter.
    pub async fn plan_profile(
        &self,
        input: PlanProfileInput,
        progress: &Progress,
    ) -> Result<Plan, EngineError> {
        in_range(&input)?;
        let python = self.python_arg(input.python.as_deref())?;
        let mut stale = None;
        let spec = match (input.target_id.as_deref(), input.target) {
            (Some(id), None) => TargetSpec::Identified(Box::new(self.target_by_id(id)?)),
            (None, Some(spec)) => spec,
            (Some(_), Some(_)) => {
                return Err(EngineError::InvalidInput {
                    field: "target".into(),
                    message: "give `target_id` or `target`, not both".into(),
                })
            }
            (None, None) => {
                return Err(EngineError::InvalidInput {
                    field: "target_id".into(),
                    message: "give the `target_id` identify_target returned (or `target`: the raw arguments or the whole target)".into(),
                })
            }
        };
        let target =
            match spec {
                TargetSpec::Arguments(arguments) => {
                    self.identify_target(IdentifyTargetInput {
                        arguments,
                        cwd: input.cwd.clone(),
                        python: python.clone(),
                    })
                    .await?
                }
                TargetSpec::Identified(t) => {
                    // A target identified earlier may have lost its processes since.
                    let gone: Vec<u32> = t
                        .processes
                        .iter()
                        .map(|p| p.pid)
                        .filter(|pid| !system_profile_sample::proc::exists(*pid))
                        .collect();
                    if gone.is_empty() {
                        self.keep_target(*t)
                    } else {
                        stale =
                            Some(format!(
                        "re-identified `{}`: process(es) {} of the given target have exited",
                        t.arguments,
                        gone.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
                    ));
                        self.identify_target(IdentifyTargetInput {
                            arguments: t.arguments.clone(),
                            cwd: Some(t.cwd.clone()),
                            python: python.clone(),
                        })
                        .await?
                    }
                }
            };
        let detect_python = python.or_else(|| {
            target
                .python
                .as_ref()
                .map(|p| p.executable.clone().unwrap_or(p.requested.clone()))
        });
        let detect = self
            .detect_tools(
                DetectToolsInput {
                    python: detect_python,
                    ..Default::default()
                },
                progress,
            )
            .await?;
        let mut p = plan(
            &target,
            &detect,
            Recipes::builtin(),
            &PlanOptions {
                focus: input.focus,
                time_budget_s: input.time_budget_s,
                root: self.root.clone(),
                program_exists: |p| system_profile_exec::which(p).is_some(),
                lang: input.lang,
            },
        );
        if let Some(note) = stale {
            p.notes.insert(0, note);
        }
        Ok(p)
    }

    /// Step 2 / 5.1: which tools, hardware and permissions this machine has. Cached per
    /// interpreter; concurrent first calls wait for one probe instead of running several.
    /// A probing call reports one progress step per part of the detection.
    pub async fn detect_tools(
        &self,
        input: DetectToolsInput,
        progress: &Progress,
    ) -> Result<DetectReport, EngineError> {
        let python = match input.python.as_deref().map(str::trim) {
            Some("") => {
                return Err(EngineError::InvalidInput {
                    field: "python".into(),
                    message: "empty interpreter name; omit it for python3 or give a path".into(),
                })
            }
            Some(p) => p.to_string(),
            None => self.config.default_python.clone(),
        };
        in_range(&input)?;
        let probe_timeout = input
            .probe_timeout_s
            .map_or(Duration::from_secs(5), Duration::from_secs_f64);
        let mut cache = self.detect_cache.lock().await;
        if !input.refresh {
            if let Some(report) = cache.get(&python) {
                let mut report = DetectReport::clone(report);
                report.cached = true;
                return Ok(report);
            }
        }
        let total = DETECT_PARTS.len() as f64;
        progress.report(0.0, Some(total), format!("probing with {python}"));
        let on_part_done = progress.is_listening().then(|| {
            let progress = progress.clone();
            let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            Arc::new(move |part: &'static str| {
                let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                progress.report(n as f64, Some(total), format!("{part} done"));
            }) as system_profile_detect::PartDone
        });
        let report = detect(&DetectOptions {
            python: python.clone(),
            probe_timeout,
            on_part_done,
        })
        .await;
        // A probe that timed out twice says nothing yet: the next call probes again.
        if report.timed_out.is_empty() {
            cache.insert(python, Arc::new(report.clone()));
        }
        Ok(report)
    }
}

impl Engine {
    /// A run's record; with `wait_s`, after waiting up to that long for it to end.
    pub async fn get_run(&self, input: GetRunInput) -> Result<RunRecord, EngineError> {
        let unknown = || EngineError::InvalidInput {
            field: "run_id".into(),
            message: format!(
                "no run `{}` in this session; list_runs shows them",
                input.run_id
            ),
        };
        self.runs.get(&input.run_id).ok_or_else(unknown)?;
        in_range(&input)?;
        if let (Some(wait), Some(mut w)) = (input.wait_s, self.runs.watcher(&input.run_id)) {
            let _ = tokio::time::timeout(Duration::from_secs_f64(wait), w.wait_for(|d| *d)).await;
        }
        self.runs.get(&input.run_id).ok_or_else(unknown)
    }

    pub fn list_runs(&self, input: ListRunsInput) -> RunList {
        let mut list = self.runs.list();
        if let Some(s) = input.status {
            list.runs.retain(|r| r.status == s);
        }
        list
    }

    /// Stop a run and kill its processes; a run that already ended is returned as it is.
    /// A file a tool names: relative to the root or absolute, and inside the root once `..`
    /// and symlinks are followed.
    fn resolve_file(&self, field: &'static str, path: &str) -> Result<PathBuf, EngineError> {
        let joined = self.root.join(path.trim());
        let real = joined
            .canonicalize()
            .map_err(|e| EngineError::InvalidInput {
                field: field.into(),
                message: format!(
                    "{}: {e}; give a path relative to {}",
                    joined.display(),
                    self.root.display()
                ),
            })?;
        if !real.starts_with(&self.root) {
            return Err(EngineError::InvalidInput {
                field: field.into(),
                message: format!(
                    "{} is outside the server's root {}: copy it under the root, or start the server with --root above it",
                    real.display(),
                    self.root.display()
                ),
            });
        }
        if !real.is_file() {
            return Err(EngineError::InvalidInput {
                field: field.into(),
                message: format!("{} is not a file", real.display()),
            });
        }
        Ok(real)
    }

    /// Kineto traces, one per rank: each analysed as it streams (gzip or not, told by its
    /// first bytes), then the ranks compared.
    pub async fn analyze_trace(
        &self,
        input: AnalyzeTraceInput,
    ) -> Result<TraceReport, EngineError> {
        if input.paths.is_empty() {
            return Err(EngineError::InvalidInput {
                field: "paths".into(),
                message:
                    "no trace given: pass the Kineto trace files (.json or .json.gz), one per rank"
                        .into(),
            });
        }
        let files = input
            .paths
            .iter()
            .map(|p| self.resolve_file("paths", p))
            .collect::<Result<Vec<_>, _>>()?;
        // One blocking task per trace, all at once: ranks are independent, and each holds
        // only its kernels' intervals.
        let resolved = files.clone();
        let tasks: Vec<_> = files
            .into_iter()
            .zip(&input.paths)
            .map(|(path, shown)| {
                let shown = shown.clone();
                tokio::task::spawn_blocking(move || analyze_file(&path, shown))
            })
            .collect();
        let mut traces = Vec::new();
        for task in tasks {
            traces.push(task.await.map_err(|e| EngineError::Failed {
                message: format!("the trace analysis stopped: {e}"),
            })??);
        }
        let balance = rank_balance(&traces);
        let alignment = system_profile_parse::kineto::align_clocks(&traces);
        let mut report = TraceReport {
            traces,
            balance,
            alignment,
            stored: None,
        };
        // Kept in the session so `summarize` reports it without reading the traces again.
        let stored = match self.runs.store_trace(&report) {
            Ok(path) => path,
            Err(e) => {
                tracing::warn!("trace analysis not stored: {e}");
                return Ok(report);
            }
        };
        report.stored = Some(stored.clone());
        // The ranks on one clock beside it, when a clock other than the reference's is known.
        if let Some(alignment) = report
            .alignment
            .clone()
            .filter(ClockAlignment::worth_merging)
        {
            // The analysis stands without the merge: a merge that fails is logged, not raised.
            let merged = format!(
                "{}-merged.json.gz",
                stored.strip_suffix(".json").unwrap_or(&stored)
            );
            let traces = report.traces.clone();
            let target = PathBuf::from(&merged);
            let fs = self.runs.fs();
            let done = tokio::task::spawn_blocking(move || {
                trace_files::merge(&fs?, &target, &resolved, &traces, &alignment)
            })
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            match done {
                Ok(()) => {
                    if let Some(a) = report.alignment.as_mut() {
                        a.merged_trace = Some(merged);
                    }
                    if let Err(e) = self.runs.restore_trace(&stored, &report) {
                        tracing::warn!("trace analysis not stored again: {e}");
                    }
                }
                Err(e) => tracing::warn!("merged trace not written: {e}"),
            }
        }
        Ok(report)
    }

    fn report_config(&self) -> system_profile_report::ReportConfig {
        system_profile_report::ReportConfig {
            root: self.root.clone(),
            current_session: self.runs.session().to_string(),
        }
    }

    /// Step 6: the session's report, written beside its manifest.
    pub async fn summarize(&self, input: SummarizeInput) -> Result<SummarizeOutput, EngineError> {
        let config = self.report_config();
        // The ledger is read for Part B: not while a change is being made.
        let _one = self.ledger_lock.lock().await;
        tokio::task::spawn_blocking(move || system_profile_report::summarize(&config, &input))
            .await
            .map_err(|e| EngineError::Failed {
                message: format!("summarize stopped: {e}"),
            })?
            .map_err(report_error)
    }

    /// Two sessions side by side, each delta against the repeats' noise.
    pub async fn compare(&self, input: CompareInput) -> Result<CompareOutput, EngineError> {
        let config = self.report_config();
        tokio::task::spawn_blocking(move || system_profile_report::compare(&config, &input))
            .await
            .map_err(|e| EngineError::Failed {
                message: format!("compare stopped: {e}"),
            })?
            .map_err(report_error)
    }

    fn instrument_config(&self) -> system_profile_instrument::InstrumentConfig {
        system_profile_instrument::InstrumentConfig {
            root: self.root.clone(),
            python: self.config.default_python.clone(),
        }
    }

    /// Step 4: measurement code into a file under the root, every change in the ledger first.
    /// Ledger calls are serialized (one lock in-process, `flock` across servers).
    pub async fn instrument_file(
        &self,
        input: InstrumentFileInput,
    ) -> Result<InstrumentResult, EngineError> {
        in_range(&input)?;
        let config = self.instrument_config();
        let _one = self.ledger_lock.lock().await;
        tokio::task::spawn_blocking(move || system_profile_instrument::instrument(&config, &input))
            .await
            .map_err(|e| EngineError::Failed {
                message: format!("instrument_file stopped: {e}"),
            })?
            .map_err(instrument_error)
    }

    /// The ledger as Part B of the report.
    pub async fn list_changes(&self, input: ListChangesInput) -> Result<ChangeList, EngineError> {
        let root = self.root.clone();
        let _one = self.ledger_lock.lock().await;
        tokio::task::spawn_blocking(move || system_profile_instrument::list_changes(&root, &input))
            .await
            .map_err(|e| EngineError::Failed {
                message: format!("list_changes stopped: {e}"),
            })?
            .map_err(instrument_error)
    }

    /// Undo changes from the ledger, verified by hash.
    pub async fn revert_changes(
        &self,
        input: RevertChangesInput,
    ) -> Result<RevertResult, EngineError> {
        let config = self.instrument_config();
        let _one = self.ledger_lock.lock().await;
        tokio::task::spawn_blocking(move || {
            system_profile_instrument::revert_changes(&config, &input)
        })
        .await
        .map_err(|e| EngineError::Failed {
            message: format!("revert_changes stopped: {e}"),
        })?
        .map_err(instrument_error)
    }

    pub fn cancel_run(&self, input: CancelRunInput) -> Result<RunRecord, EngineError> {
        self.runs
            .cancel(&input.run_id)
            .ok_or_else(|| EngineError::InvalidInput {
                field: "run_id".into(),
                message: format!(
                    "no run `{}` in this session; list_runs shows them",
                    input.run_id
                ),
            })
    }
}

#[cfg(test)]
mod tests;
