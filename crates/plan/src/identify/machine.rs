//! Everything identification asks of the machine it runs on, in one place: files and folders,
//! PATH, HOME, the process table and what /proc tells of a process, sockets, systemd and the
//! interpreter. The rest of `identify` decides on these answers only, so it runs the same on a
//! machine made of plain data (its tests) as on this one (`Live`).

use crate::procinfo::Table;
use crate::pyhelper::{self, Answers, HelperError, Questions};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;
pub use system_profile_cluster::{ClusterError, ClusterErrorKind};
pub use system_profile_model::target::ClusterJob;
use system_profile_model::target::SystemdUnit;
pub use system_profile_parse::slurm::QueueRow;

/// An answer that takes a subprocess (the interpreter, `systemctl`).
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a path is, following symbolic links (as `Path::exists` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Missing,
    Dir,
    File {
        executable: bool,
        bytes: u64,
    },
    /// A socket, device or pipe.
    Other,
}

/// The questions identification asks of a machine.
pub trait Machine: Sync {
    fn kind(&self, path: &Path) -> FileKind;
    /// The first `max_bytes` of a file; `None` when it cannot be read.
    fn read_head(&self, path: &Path, max_bytes: usize) -> Option<Vec<u8>>;
    /// A folder's entries with what each is, not following links (a link is `Other`).
    fn list_dir(&self, dir: &Path) -> Vec<(String, FileKind)>;
    /// A program's path on PATH.
    fn which(&self, program: &str) -> Option<PathBuf>;
    fn home(&self) -> Option<String>;
    /// The uid this server runs as: the user whose processes a question may offer.
    fn uid(&self) -> u32;
    /// The running processes, without this server and its children.
    fn processes(&self) -> Table;
    fn exe(&self, pid: u32) -> Option<PathBuf>;
    fn cwd_of(&self, pid: u32) -> Option<PathBuf>;
    /// Files a process maps (its libraries), in order.
    fn mapped_files(&self, pid: u32) -> Vec<PathBuf>;
    fn environ(&self, pid: u32) -> HashMap<String, String>;
    /// Inodes of the TCP sockets listening on `port`.
    fn listening_inodes(&self, port: u16) -> Vec<u64>;
    /// Socket inodes a process holds open.
    fn socket_inodes(&self, pid: u32) -> Vec<u64>;
    /// `<name>.service` as systemd knows it; `Err` says why units were not checked.
    fn systemd_unit<'a>(
        &'a self,
        name: &'a str,
    ) -> Pending<'a, Result<Option<SystemdUnit>, String>>;
    /// A Slurm job by id, as `scontrol` describes it.
    fn slurm_job<'a>(&'a self, job_id: &'a str) -> Pending<'a, Result<ClusterJob, ClusterError>>;
    /// The jobs `squeue` lists.
    fn slurm_queue(&self) -> Pending<'_, Result<Vec<QueueRow>, ClusterError>>;
    /// The live actors of a Ray job (every job's for "") and their nodes, from Ray's state API.
    fn ray_job<'a>(&'a self, job: &'a str) -> Pending<'a, Result<ClusterJob, ClusterError>>;
    /// The user this server runs as, by name (a job's owner is named so).
    fn user_name(&self) -> Option<String>;
    /// The interpreter's answers about files, modules and versions (`pyhelper`).
    fn ask_python<'a>(
        &'a self,
        python: &'a str,
        cwd: &'a Path,
        questions: &'a Questions,
        timeout: Duration,
    ) -> Pending<'a, Result<Answers, HelperError>>;

    fn exists(&self, path: &Path) -> bool {
        self.kind(path) != FileKind::Missing
    }

    fn is_file(&self, path: &Path) -> bool {
        matches!(self.kind(path), FileKind::File { .. })
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.kind(path) == FileKind::Dir
    }
}

/// This machine.
pub struct Live;

fn kind_of(meta: std::io::Result<std::fs::Metadata>) -> FileKind {
    use std::os::unix::fs::PermissionsExt;
    match meta {
        Err(_) => FileKind::Missing,
        Ok(m) if m.is_dir() => FileKind::Dir,
        Ok(m) if m.is_file() => FileKind::File {
            executable: m.permissions().mode() & 0o111 != 0,
            bytes: m.len(),
        },
        Ok(_) => FileKind::Other,
    }
}

impl Machine for Live {
    fn kind(&self, path: &Path) -> FileKind {
        kind_of(std::fs::metadata(path))
    }

    fn read_head(&self, path: &Path, max_bytes: usize) -> Option<Vec<u8>> {
        use std::io::Read;
        let mut head = Vec::new();
        std::fs::File::open(path)
            .ok()?
            .take(max_bytes as u64)
            .read_to_end(&mut head)
            .ok()?;
        Some(head)
    }

    fn list_dir(&self, dir: &Path) -> Vec<(String, FileKind)> {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        rd.filter_map(|e| {
            let e = e.ok()?;
            let kind = match e.file_type() {
                Ok(t) if t.is_symlink() => FileKind::Other,
                _ => kind_of(e.metadata()),
            };
            Some((e.file_name().to_string_lossy().into_owned(), kind))
        })
        .collect()
    }

    fn which(&self, program: &str) -> Option<PathBuf> {
        system_profile_exec::which(program)
    }

    fn home(&self) -> Option<String> {
        std::env::var("HOME").ok()
    }

    fn uid(&self) -> u32 {
        // SAFETY: getuid has no preconditions and cannot fail.
        unsafe { libc::getuid() }
    }

    fn processes(&self) -> Table {
        Table::read()
    }

    fn exe(&self, pid: u32) -> Option<PathBuf> {
        system_profile_sample::proc::exe(pid)
    }

    fn cwd_of(&self, pid: u32) -> Option<PathBuf> {
        system_profile_sample::proc::cwd(pid)
    }

    fn mapped_files(&self, pid: u32) -> Vec<PathBuf> {
        system_profile_sample::proc::mapped_files(pid)
    }

    fn environ(&self, pid: u32) -> HashMap<String, String> {
        system_profile_sample::proc::environ(pid)
    }

    fn listening_inodes(&self, port: u16) -> Vec<u64> {
        system_profile_sample::proc::listening_inodes(port)
    }

    fn socket_inodes(&self, pid: u32) -> Vec<u64> {
        system_profile_sample::proc::socket_inodes(pid)
    }

    fn systemd_unit<'a>(
        &'a self,
        name: &'a str,
    ) -> Pending<'a, Result<Option<SystemdUnit>, String>> {
        Box::pin(systemd_unit(name))
    }

    fn ask_python<'a>(
        &'a self,
        python: &'a str,
        cwd: &'a Path,
        questions: &'a Questions,
        timeout: Duration,
    ) -> Pending<'a, Result<Answers, HelperError>> {
        Box::pin(pyhelper::ask(python, cwd, questions, timeout))
    }

    fn slurm_job<'a>(&'a self, job_id: &'a str) -> Pending<'a, Result<ClusterJob, ClusterError>> {
        Box::pin(system_profile_cluster::slurm_job(job_id))
    }

    fn slurm_queue(&self) -> Pending<'_, Result<Vec<QueueRow>, ClusterError>> {
        Box::pin(system_profile_cluster::slurm_queue())
    }

    fn user_name(&self) -> Option<String> {
        system_profile_sample::proc::user_names().remove(&self.uid())
    }

    fn ray_job<'a>(&'a self, job: &'a str) -> Pending<'a, Result<ClusterJob, ClusterError>> {
        Box::pin(system_profile_cluster::ray_job(job))
    }
}

/// `systemctl show` of `<name>.service`, when systemd runs this machine.
async fn systemd_unit(name: &str) -> Result<Option<SystemdUnit>, String> {
    if !Path::new("/run/systemd/system").is_dir() {
        return Err(
            "systemd is not running here (no /run/systemd/system): units not checked".into(),
        );
    }
    let Some(systemctl) = system_profile_exec::which("systemctl") else {
        return Err("systemctl is not on PATH: units not checked".into());
    };
    let unit = if name.contains('.') {
        name.to_string()
    } else {
        format!("{name}.service")
    };
    let spec = system_profile_exec::CommandSpec::new([
        systemctl.as_os_str(),
        "show".as_ref(),
        "--property=MainPID,ActiveState,LoadState".as_ref(),
        unit.as_ref(),
    ]);
    let out = system_profile_exec::run(
        &spec,
        &system_profile_exec::RunOptions::with_timeout(Duration::from_secs(3)),
    )
    .await
    .map_err(|e| format!("systemctl failed: {e}"))?;
    let text = out.stdout.text();
    let prop = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or("")
            .to_string()
    };
    if prop("LoadState") == "not-found" || prop("LoadState").is_empty() {
        return Ok(None);
    }
    Ok(Some(SystemdUnit {
        unit,
        active_state: prop("ActiveState"),
        main_pid: prop("MainPID").parse().unwrap_or(0),
    }))
}
