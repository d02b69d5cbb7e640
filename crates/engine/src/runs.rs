//! Runs and jobs: each `run_profiler` call is a task with a record in this session's
//! `profile_output/<session>/manifest.json`, written when the run starts and again when it
//! ends, atomically (a temporary file renamed over the old one).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use system_profile_confine::Confined;
use system_profile_model::run::{RunList, RunProfilerInput, RunRecord, RunStatus, StepNotRun};
use system_profile_runner::{Execution, RunErrorKind};
use tokio::sync::watch;

pub fn now_unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `YYYYMMDD-HHMMSS` in UTC for a Unix time (days-from-civil, inverted).
pub fn utc_stamp(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

/// Write `bytes` to `path` (under `fs`'s root) through a temporary file in the same folder
/// and a rename, so a reader sees the old file or the new one, never half of one; resolved
/// beneath the root, so a symlink placed on the way leads nowhere.
pub fn write_atomically(
    fs: &Confined,
    path: &Path,
    bytes: &[u8],
    mode: u32,
) -> std::io::Result<()> {
    // The one atomic write of the project (temp, fsync, rename, fsync of the folder).
    let temp = path.with_extension("json.tmp");
    let temp_name = temp
        .file_name()
        .map_or_else(|| ".sp.tmp".into(), |n| n.to_string_lossy().into_owned());
    fs.write_atomic(path, &temp_name, bytes, mode, || {})
        .map_err(std::io::Error::other)
}

/// One run in progress: how to stop it and how to learn that it ended.
struct Job {
    abort: tokio::task::AbortHandle,
    done: watch::Receiver<bool>,
}

/// This session's runs.
pub struct RunBook {
    root: PathBuf,
    session: String,
    records: Mutex<Vec<RunRecord>>,
    /// Planned steps `profile` left out.
    not_run: Mutex<Vec<StepNotRun>>,
    jobs: Mutex<HashMap<String, Job>>,
    /// Serialises manifest writes (records are cloned under `records`, written outside it)
    /// and holds the change number the file on disk reflects.
    write_lock: Mutex<u64>,
    /// Bumped by every change to `records`: a writer that finds the file already reflects
    /// its change (another wrote a newer state meanwhile) skips its own write.
    changes: std::sync::atomic::AtomicU64,
    /// Run numbers handed out; concurrent calls each get their own, whatever the order in
    /// which their records are inserted.
    numbers: std::sync::atomic::AtomicUsize,
}

impl RunBook {
    pub fn new(root: PathBuf) -> RunBook {
        let started = now_unix_s() as u64;
        RunBook {
            root,
            session: format!("{}-{}", utc_stamp(started), std::process::id()),
            records: Mutex::new(Vec::new()),
            not_run: Mutex::new(Vec::new()),
            jobs: Mutex::new(HashMap::new()),
            write_lock: Mutex::new(0),
            changes: std::sync::atomic::AtomicU64::new(0),
            numbers: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    /// The session's folder, relative to the root.
    pub fn session_dir(&self) -> PathBuf {
        Path::new("profile_output").join(&self.session)
    }

    fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }

    /// The root, opened for confined reads and writes.
    pub fn fs(&self) -> std::io::Result<Confined> {
        Ok(Confined::open(&self.root)?)
    }

    /// A new run's id and absolute folder, made here and new: a file, folder or symlink that
    /// someone put at that name (a profiled program can) is refused, never written through.
    pub fn allocate(&self, input: &RunProfilerInput) -> std::io::Result<(String, PathBuf)> {
        let n = self
            .numbers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        let id = format!("r{n:03}-{}", input.profiler.id().replace('_', "-"));
        let fs = self.fs()?;
        system_profile_instrument::output_dir(&fs).map_err(std::io::Error::other)?;
        let rel = self.session_dir().join(&id);
        fs.create_dir_all(&self.session_dir())?;
        fs.create_dir_new(&rel)?;
        Ok((id, self.root.join(rel)))
    }

    pub fn list(&self) -> RunList {
        RunList {
            session: self.session.clone(),
            dir: self.session_dir().to_string_lossy().into_owned(),
            logical_cpus: std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u32),
            runs: self.records.lock().map(|r| r.clone()).unwrap_or_default(),
            not_run: self.not_run.lock().map(|n| n.clone()).unwrap_or_default(),
        }
    }

    /// Keep in the manifest that a planned step was left out, and why.
    pub fn left_out(&self, step: StepNotRun) {
        self.push_and_save(&self.not_run, step);
    }

    /// Append to one of the manifest's lists, and write the manifest.
    fn push_and_save<T>(&self, list: &Mutex<Vec<T>>, item: T) {
        if let Ok(mut l) = list.lock() {
            l.push(item);
            self.changes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        if let Err(e) = self.save() {
            tracing::warn!("manifest not written: {e}");
        }
    }

    pub fn get(&self, run_id: &str) -> Option<RunRecord> {
        self.records
            .lock()
            .ok()?
            .iter()
            .find(|r| r.run_id == run_id)
            .cloned()
    }

    /// Write manifest.json from the records as they are now; returns once the file holds
    /// at least this call's state. It blocks (fsync): called from async code, it leaves its
    /// worker thread to the runtime's other tasks meanwhile, so a burst of runs starting and
    /// ending does not stall the transport (`ping` stays fast).
    pub fn save(&self) -> std::io::Result<()> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        let wanted = self.changes.load(std::sync::atomic::Ordering::SeqCst);
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.write_manifest(wanted))
            }
            _ => self.write_manifest(wanted),
        }
    }

    fn write_manifest(&self, wanted: u64) -> std::io::Result<()> {
        let mut on_disk = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        if *on_disk >= wanted && wanted > 0 {
            return Ok(());
        }
        let state = self.changes.load(std::sync::atomic::Ordering::SeqCst);
        let list = self.list();
        let dir = self.session_dir();
        let fs = self.fs()?;
        // profile_output/ with its `*` .gitignore, so our files never show in git status.
        system_profile_instrument::output_dir(&fs).map_err(std::io::Error::other)?;
        fs.create_dir_all(&dir)?;
        let text = serde_json::to_vec_pretty(&list).map_err(std::io::Error::other)?;
        write_atomically(&fs, &dir.join("manifest.json"), &text, 0o644)?;
        *on_disk = state;
        Ok(())
    }

    /// Keep an `analyze_trace` result as `traces/tNNN.json` in the session folder; returns
    /// its path relative to the root.
    pub fn store_trace(
        &self,
        report: &system_profile_model::trace::TraceReport,
    ) -> std::io::Result<String> {
        let _one_writer = self.write_lock.lock();
        let fs = self.fs()?;
        system_profile_instrument::output_dir(&fs).map_err(std::io::Error::other)?;
        let rel = self.session_dir().join(system_profile_report::TRACES_DIR);
        fs.create_dir_all(&rel)?;
        let n = fs
            .read_dir_names(&rel)?
            .iter()
            .filter(|name| name.ends_with(".json"))
            .count()
            + 1;
        let name = format!("t{n:03}.json");
        let text = serde_json::to_vec_pretty(report).map_err(std::io::Error::other)?;
        write_atomically(&fs, &rel.join(&name), &text, 0o644)?;
        // The manifest too, so the session is listed even when it has no run.
        drop(_one_writer);
        self.save()?;
        Ok(rel.join(name).to_string_lossy().into_owned())
    }

    /// Write `report` again where `store_trace` put it (once its merged trace is written).
    pub fn restore_trace(
        &self,
        stored: &str,
        report: &system_profile_model::trace::TraceReport,
    ) -> std::io::Result<()> {
        let _one_writer = self.write_lock.lock();
        let text = serde_json::to_vec_pretty(report).map_err(std::io::Error::other)?;
        write_atomically(&self.fs()?, Path::new(stored), &text, 0o644)
    }

    pub fn insert(&self, record: RunRecord) {
        self.push_and_save(&self.records, record);
    }

    /// Mark a run as standing in for the step's method that could not start.
    pub fn stands_in_for(&self, run_id: &str, replaced: system_profile_model::run::InsteadOf) {
        self.update(run_id, |rec| rec.instead_of = Some(replaced));
    }

    fn update(&self, run_id: &str, f: impl FnOnce(&mut RunRecord)) {
        if let Ok(mut r) = self.records.lock() {
            if let Some(rec) = r.iter_mut().find(|r| r.run_id == run_id) {
                f(rec);
            }
            self.changes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        if let Err(e) = self.save() {
            tracing::warn!("manifest not written: {e}");
        }
    }

    /// Fill a record from a finished execution.
    pub fn finish(&self, run_id: &str, result: Result<Execution, system_profile_runner::RunError>) {
        let ended = now_unix_s();
        self.update(run_id, |rec| {
            rec.ended_at_unix_s = Some(ended);
            match result {
                Ok(e) => {
                    rec.status = e.status;
                    rec.argv = e.argv;
                    rec.exit_code = e.exit_code;
                    rec.signal = e.signal;
                    rec.wall_s = Some(e.wall_s);
                    rec.artifacts = e
                        .artifacts
                        .into_iter()
                        .map(|a| system_profile_model::run::Artifact {
                            path: self.relative(&a.path),
                            kind: a.kind,
                            bytes: a.bytes,
                        })
                        .collect();
                    rec.metrics = e.metrics;
                    rec.stdout_tail = e.stdout_tail;
                    rec.stderr_tail = e.stderr_tail;
                    rec.warnings = e.warnings;
                    rec.error = e.error;
                    rec.not_started = e.not_started;
                    rec.error_kind = e.error_kind;
                }
                Err(err) => {
                    rec.status = RunStatus::Failed;
                    rec.not_started = Some(err.to_string());
                    rec.error_kind = Some(err.kind());
                    rec.wall_s = Some(ended - rec.started_at_unix_s);
                    // A missing profiler comes with the line that installs it.
                    let hint = rec
                        .profiler
                        .spec()
                        .tool
                        .and_then(|id| system_profile_detect::catalog().iter().find(|t| t.id == id))
                        .map(|t| t.install_hint);
                    rec.error = Some(match (err.kind(), hint) {
                        (RunErrorKind::ToolUnavailable, Some(h)) => {
                            format!("{err}; to install: {h}")
                        }
                        (RunErrorKind::ToolUnavailable, None) => {
                            format!("{err} (detect_tools says how to install or permit it)")
                        }
                        _ => err.to_string(),
                    });
                }
            }
        });
    }

    pub fn register(
        &self,
        run_id: &str,
        abort: tokio::task::AbortHandle,
        done: watch::Receiver<bool>,
    ) {
        if let Ok(mut j) = self.jobs.lock() {
            j.insert(run_id.to_string(), Job { abort, done });
        }
    }

    pub fn unregister(&self, run_id: &str) {
        if let Ok(mut j) = self.jobs.lock() {
            j.remove(run_id);
        }
    }

    /// Stop a running run: its task is aborted (its process group dies with it) and the
    /// record says cancelled. A run that already ended is left as it is.
    pub fn cancel(&self, run_id: &str) -> Option<RunRecord> {
        let job = self.jobs.lock().ok()?.remove(run_id);
        if let Some(job) = job {
            job.abort.abort();
            let ended = now_unix_s();
            self.update(run_id, |rec| {
                if rec.status == RunStatus::Running {
                    rec.status = RunStatus::Cancelled;
                    rec.ended_at_unix_s = Some(ended);
                    rec.wall_s = Some(ended - rec.started_at_unix_s);
                    rec.error = Some("cancelled: the run's processes were killed".into());
                }
            });
        }
        self.get(run_id)
    }

    /// A receiver that turns true when the run ends; `None` when it is not running.
    pub fn watcher(&self, run_id: &str) -> Option<watch::Receiver<bool>> {
        self.jobs.lock().ok()?.get(run_id).map(|j| j.done.clone())
    }
}

/// Cancels its run when dropped before `disarm`: a foreground `run_profiler` whose caller
/// went away (the client cancelled) takes its run with it.
pub struct CancelOnDrop {
    pub book: Arc<RunBook>,
    pub run_id: String,
    pub armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.book.cancel(&self.run_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
        assert_eq!(utc_stamp(1_796_212_800 + 3_723), "20261202-130203");
    }

    #[test]
    fn atomic_write_replaces_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Confined::open(dir.path()).unwrap();
        let p = dir.path().join("manifest.json");
        write_atomically(&fs, &p, b"{\"a\":1}", 0o644).unwrap();
        write_atomically(&fs, &p, b"{}", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{}");
        assert!(!dir.path().join("manifest.json.tmp").exists());
    }
}
