//! Step 5 through the engine: a run resolved from an identified target, given its folder and
//! manifest record, supervised, and finished however its caller goes.

use super::*;

impl Engine {
    /// Step 5: run one method now, or in the background (`background: true`). The run gets a
    /// folder under `profile_output/<session>/` and a record in the session's manifest from
    /// its start; a foreground call reports its elapsed time as progress, and takes its run
    /// with it when the caller goes away.
    pub async fn run_profiler(
        &self,
        input: RunProfilerInput,
        progress: &Progress,
    ) -> Result<RunRecord, EngineError> {
        let finished = self.run_recorded(input, progress).await?;
        match (&finished.not_started, &finished.error) {
            // Could not start at all: the caller gets an error that says what to do.
            (Some(_), Some(e)) if finished.metrics == Default::default() => {
                Err(EngineError::Failed {
                    message: format!(
                        "{} (run {} recorded in {})",
                        e, finished.run_id, finished.dir
                    ),
                })
            }
            _ => Ok(finished),
        }
    }

    /// A `{"target_id": …}` target as what it names: a program's command (run in the
    /// target's folder unless `cwd` says), a process's PID, or the machine for a focus alone.
    fn resolve_run_target(
        &self,
        mut input: RunProfilerInput,
    ) -> Result<RunProfilerInput, EngineError> {
        let RunTarget::Identified { target_id } = &input.target else {
            return Ok(input);
        };
        let t = self.target_by_id(target_id)?;
        let invalid = |message: String| EngineError::InvalidInput {
            field: "target.target_id".into(),
            message,
        };
        let running = matches!(
            t.kind,
            TargetKind::Process | TargetKind::Service | TargetKind::Framework
        );
        input.target = match (&t.command, t.processes.as_slice()) {
            _ if t.needs_clarification => {
                return Err(invalid(format!(
                    "target {target_id} is not resolved: ask its questions, then identify_target again"
                )))
            }
            (_, [one]) if running => RunTarget::Pid { pid: one.pid },
            (_, many) if running && !many.is_empty() => {
                let pids: Vec<String> = many.iter().map(|p| p.pid.to_string()).collect();
                return Err(invalid(format!(
                    "target {target_id} is {} processes ({}): give target.pid for one (plan_profile plans one step per process)",
                    many.len(),
                    pids.join(", ")
                )));
            }
            (Some(command), _) if !command.is_empty() => {
                if input.cwd.is_none() {
                    input.cwd = Some(t.cwd.clone());
                }
                RunTarget::Command {
                    command: command.clone(),
                    shell: false,
                }
            }
            _ if t.kind == TargetKind::Focus => RunTarget::System { system: true },
            _ => {
                return Err(invalid(format!(
                    "target {target_id} names no command, process or machine to run on: give target.command or target.pid"
                )))
            }
        };
        Ok(input)
    }

    /// `run_profiler`, with the record of a run that could not start (`not_started`) given
    /// back as a record: the pipeline falls back from it to the step's next method.
    pub(crate) async fn run_recorded(
        &self,
        input: RunProfilerInput,
        progress: &Progress,
    ) -> Result<RunRecord, EngineError> {
        in_range(&input)?;
        if let Some(message) = input.observers_refused() {
            return Err(EngineError::InvalidInput {
                field: "options.observers".into(),
                message,
            });
        }
        let input = self.resolve_run_target(input)?;
        if let RunTarget::System { system: false } = input.target {
            return Err(EngineError::InvalidInput {
                field: "target".into(),
                message: "`system` must be true (the whole machine), or give `command` or `pid`"
                    .into(),
            });
        }
        if let Some(k) = input.env.keys().find(|k| k.is_empty() || k.contains('=')) {
            return Err(EngineError::InvalidInput {
                field: "env".into(),
                message: format!("{k:?} is not a variable name"),
            });
        }
        let cwd = self.resolve_cwd(input.cwd.as_deref())?;
        let mut input = input;
        if let Some(path) = self.path_with_tool(&input).await {
            input.env.insert("PATH".into(), path);
        }
        let (run_id, dir) = self
            .runs
            .allocate(&input)
            .map_err(|e| EngineError::Failed {
                message: format!("cannot make the run's folder: {e}"),
            })?;
        // The whole environment the child gets: the server's own (inherited: an agent's API
        // keys) and the call's.
        let mut scrubber = system_profile_model::secrets::Scrubber::from_env(
            std::env::vars()
                .collect::<Vec<_>>()
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .chain(input.env.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        );
        if let RunTarget::Command { command, .. } = &input.target {
            scrubber.learn_argv(command);
        }
        let record = RunRecord {
            run_id: run_id.clone(),
            session: self.runs.session().to_string(),
            profiler: input.profiler,
            observers: input.options.observers.clone(),
            label: input.label.clone(),
            status: RunStatus::Running,
            target: secrets::scrub_target(&scrubber, &input.target),
            argv: Vec::new(),
            cwd: cwd.to_string_lossy().into_owned(),
            env: system_profile_model::run::masked_env(&input.env),
            started_at_unix_s: runs::now_unix_s(),
            ended_at_unix_s: None,
            wall_s: None,
            exit_code: None,
            signal: None,
            dir: self
                .runs
                .session_dir()
                .join(&run_id)
                .to_string_lossy()
                .into_owned(),
            artifacts: Vec::new(),
            metrics: Default::default(),
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            warnings: Vec::new(),
            error: None,
            not_started: None,
            error_kind: None,
            instead_of: None,
        };
        self.runs.insert(record.clone());
        let place = system_profile_runner::RunPlace {
            dir,
            cwd,
            run_id: run_id.clone(),
            ..Default::default()
        };
        let samples = place.samples_taken.clone();
        let (done_tx, done_rx) = tokio::sync::watch::channel(false);
        let book = self.runs.clone();
        let id = run_id.clone();
        let background = input.background;
        let task = tokio::spawn(async move {
            let mut result = system_profile_runner::execute(&input, &place).await;
            // A child that prints its secrets (a startup banner echoing its token, or the
            // server's own inherited API key) must not put them in anything we keep or
            // return: the record's argv, tails, warnings and error, and the text files of the
            // run folder, are scrubbed (`secrets`). The child got the real values.
            if let Ok(e) = &mut result {
                secrets::scrub_execution(&scrubber, e);
            }
            book.finish(&id, result);
            book.unregister(&id);
            let _ = done_tx.send(true);
        });
        self.runs
            .register(&run_id, task.abort_handle(), done_rx.clone());
        if background {
            return Ok(record);
        }
        let mut guard = runs::CancelOnDrop {
            book: self.runs.clone(),
            run_id: run_id.clone(),
            armed: true,
        };
        let started = std::time::Instant::now();
        let mut done = done_rx;
        loop {
            tokio::select! {
                _ = done.wait_for(|d| *d) => break,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    let s = started.elapsed().as_secs_f64();
                    let n = samples.load(std::sync::atomic::Ordering::Relaxed);
                    let taken = if n > 0 { format!(", {n} samples") } else { String::new() };
                    progress.report(s.floor(), None, format!("{} running for {s:.0} s{taken}", record.profiler.id()));
                }
            }
        }
        guard.armed = false;
        Ok(self.runs.get(&run_id).unwrap_or(record))
    }
}
