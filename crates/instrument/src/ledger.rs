//! `profile_output/ledger.json` and the files it answers for.
//!
//! Every write is atomic (a temp file in the same directory, fsync, rename, fsync of the
//! directory) and happens in this order: backups, then the ledger with the change in state
//! `applying`, then the target file, then the ledger again with `active`. Reverts go the same
//! way through `reverting`. Opening the ledger settles any change a crash left half-way by
//! the hash of the file on disk, so after a crash at any point a change is either absent with
//! the old file, or present with the new one. One server at a time holds the ledger (`flock`
//! on `profile_output/ledger.lock`).

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use system_profile_confine::{ConfineError, ConfineErrorKind, Confined};
use system_profile_model::instrument::{Change, ChangeState, Ledger};

pub const OUTPUT_DIR: &str = "profile_output";
pub const LEDGER_FILE: &str = "profile_output/ledger.json";
pub const BACKUP_DIR: &str = "profile_output/.backup";
const LEDGER_VERSION: u32 = 1;

/// Why the ledger or a file it answers for could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "{path} is not a ledger this version reads ({detail}); move it aside to start a new one"
    )]
    Unreadable { path: PathBuf, detail: String },
    #[error("{0}")]
    Damaged(String),
    #[error(transparent)]
    Confined(#[from] ConfineError),
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A named point where a test may have the process SIGKILL itself
/// (`SYSTEM_PROFILE_FAILPOINT=<name>` or `<name>#<n>` for the n-th time it is passed): how the
/// fault tests stop the server between two writes. Unset, it costs one env lookup.
pub fn failpoint(name: &str) {
    static HITS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let Some(spec) = std::env::var_os("SYSTEM_PROFILE_FAILPOINT") else {
        return;
    };
    let spec = spec.to_string_lossy();
    let (point, nth) = match spec.split_once('#') {
        Some((p, n)) => (p, n.parse::<u32>().unwrap_or(1)),
        None => (&*spec, 1),
    };
    if point == name && HITS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == nth {
        // SAFETY: kill(2) on our own pid with a valid signal number.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

pub fn temp_path(path: &Path, id: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.sp-{id}.tmp"))
}

/// Write `bytes` to `path` (under `fs`'s root) atomically with permission bits `mode`,
/// through `temp` in the same folder, resolved beneath the root (`confine`).
pub fn write_atomic(
    fs: &Confined,
    path: &Path,
    temp: &Path,
    bytes: &[u8],
    mode: u32,
    failpoint_name: Option<&str>,
) -> Result<(), LedgerError> {
    let temp_name = temp
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| ".sp.tmp".into());
    fs.write_atomic(path, &temp_name, bytes, mode, || {
        if let Some(name) = failpoint_name {
            failpoint(name);
        }
    })?;
    Ok(())
}

/// `profile_output/` under the root, made when missing, with a `.gitignore` of `*` so that
/// nothing we write there shows in the user's `git status`.
pub fn output_dir(fs: &Confined) -> Result<PathBuf, LedgerError> {
    let dir = Path::new(OUTPUT_DIR);
    fs.create_dir_all(dir)?;
    let ignore = dir.join(".gitignore");
    if !fs.exists(&ignore) {
        // Servers and calls may make it at once: each through a temp name of its own.
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        write_atomic(
            fs,
            &ignore,
            &dir.join(format!(".gitignore.{}-{n}.tmp", std::process::id())),
            b"# written by system-profile: nothing here is source\n*\n",
            0o644,
            None,
        )?;
    }
    Ok(fs.path().join(dir))
}

/// The ledger, locked for this process while the value lives.
pub struct LedgerStore {
    root: PathBuf,
    /// Every file the ledger reads or writes, resolved beneath the root.
    pub fs: Confined,
    path: PathBuf,
    _lock: File,
    pub ledger: Ledger,
}

impl LedgerStore {
    /// Lock, read (an absent ledger is an empty one), and settle what a crash left.
    pub fn open(root: &Path) -> Result<LedgerStore, LedgerError> {
        let fs = Confined::open(root)?;
        output_dir(&fs)?;
        fs.create_dir_all(Path::new(BACKUP_DIR))?;
        let lock_path = root.join(OUTPUT_DIR).join("ledger.lock");
        let lock = match fs.create_new(&lock_path, 0o600) {
            Ok(f) => f,
            Err(e) if e.kind() == ConfineErrorKind::Exists => fs.open_read(&lock_path)?,
            Err(e) => return Err(e.into()),
        };
        // SAFETY: flock on a descriptor we own; blocks until another server lets go.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(LedgerError::Io {
                path: lock_path,
                source: io::Error::last_os_error(),
            });
        }
        let path = root.join(LEDGER_FILE);
        let ledger = match fs.read(&path) {
            Ok(bytes) => {
                serde_json::from_slice::<Ledger>(&bytes).map_err(|e| LedgerError::Unreadable {
                    path: path.clone(),
                    detail: e.to_string(),
                })?
            }
            Err(e) if e.kind() == ConfineErrorKind::NotFound => Ledger {
                version: LEDGER_VERSION,
                next_id: 1,
                changes: Vec::new(),
            },
            Err(e) => return Err(e.into()),
        };
        if ledger.version > LEDGER_VERSION {
            return Err(LedgerError::Unreadable {
                path,
                detail: format!("version {}", ledger.version),
            });
        }
        let mut store = LedgerStore {
            root: root.to_path_buf(),
            fs,
            path,
            _lock: lock,
            ledger,
        };
        if store.settle()? {
            store.save()?;
        }
        Ok(store)
    }

    pub fn abs(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The hash of a file now, `None` when it is absent.
    pub fn current_hash(&self, rel: &str) -> Result<Option<String>, LedgerError> {
        match self.fs.read(Path::new(rel)) {
            Ok(b) => Ok(Some(sha256_hex(&b))),
            Err(e) if e.kind() == ConfineErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Settle changes a crash left in `applying` or `reverting`; true when any moved.
    fn settle(&mut self) -> Result<bool, LedgerError> {
        let mut changed = false;
        let mut drop_ids = Vec::new();
        for i in 0..self.ledger.changes.len() {
            let c = &self.ledger.changes[i];
            let _ = self.fs.remove_file(&temp_path(Path::new(&c.file), &c.id));
            if !matches!(c.state, ChangeState::Applying | ChangeState::Reverting) {
                continue;
            }
            let now = self.current_hash(&c.file)?;
            let is_before = now.as_deref() == c.sha256_before.as_deref();
            let c = &mut self.ledger.changes[i];
            changed = true;
            match c.state {
                ChangeState::Applying if is_before => drop_ids.push(c.id.clone()),
                ChangeState::Reverting if is_before => {
                    c.state = ChangeState::Reverted;
                    c.reverted_at = Some(now_rfc3339());
                }
                // The new bytes are there, or something else is: the change stands, and a
                // revert will see whose bytes they are.
                _ => c.state = ChangeState::Active,
            }
        }
        for id in &drop_ids {
            for suffix in ["", ".after"] {
                let _ = self
                    .fs
                    .remove_file(&Path::new(BACKUP_DIR).join(format!("{id}{suffix}")));
            }
        }
        self.ledger.changes.retain(|c| !drop_ids.contains(&c.id));
        Ok(changed)
    }

    /// Write the ledger atomically.
    pub fn save(&self) -> Result<(), LedgerError> {
        let mut text = serde_json::to_vec_pretty(&self.ledger).map_err(|e| {
            LedgerError::Damaged(format!("the ledger could not be serialized: {e}"))
        })?;
        text.push(b'\n');
        write_atomic(
            &self.fs,
            &self.path,
            &self.path.with_extension("json.tmp"),
            &text,
            0o644,
            None,
        )
    }

    /// Take the next change id.
    pub fn next_id(&mut self) -> String {
        let id = format!("c{:04}", self.ledger.next_id);
        self.ledger.next_id += 1;
        id
    }

    pub fn find(&self, id: &str) -> Option<&Change> {
        self.ledger.changes.iter().find(|c| c.id == id)
    }

    pub fn find_mut(&mut self, id: &str) -> Option<&mut Change> {
        self.ledger.changes.iter_mut().find(|c| c.id == id)
    }

    /// Keep `bytes` as `profile_output/.backup/<name>`; returns the path relative to the root.
    pub fn write_backup(&self, name: &str, bytes: &[u8]) -> Result<String, LedgerError> {
        let rel = format!("{BACKUP_DIR}/{name}");
        let path = Path::new(&rel);
        write_atomic(
            &self.fs,
            path,
            &path.with_extension("tmp"),
            bytes,
            0o600,
            None,
        )?;
        Ok(rel)
    }

    /// Read a backup and check it is what the ledger says it is.
    pub fn read_backup(&self, rel: &str, sha256: &str) -> Result<Vec<u8>, LedgerError> {
        let bytes = self.fs.read(Path::new(rel))?;
        if sha256_hex(&bytes) != sha256 {
            return Err(LedgerError::Damaged(format!(
                "{rel} does not hold the bytes the ledger recorded (sha256 differs): it was changed or damaged"
            )));
        }
        Ok(bytes)
    }

    /// Record `change` (state `applying`), write `new` to its file, mark it `active`.
    /// For a modified file the caller has written the backups already.
    pub fn apply(&mut self, mut change: Change, new: &[u8]) -> Result<Change, LedgerError> {
        change.state = ChangeState::Applying;
        let id = change.id.clone();
        let path = PathBuf::from(&change.file);
        let mode = change.mode.unwrap_or(0o644);
        self.ledger.changes.push(change);
        self.save()?;
        failpoint("apply:after_ledger");
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.fs.create_dir_all(parent)?;
        }
        let written = write_atomic(
            &self.fs,
            &path,
            &temp_path(&path, &id),
            new,
            mode,
            Some("apply:before_rename"),
        );
        if let Err(e) = written {
            // Nothing landed: take the entry out again.
            self.ledger.changes.retain(|c| c.id != id);
            self.save()?;
            return Err(e);
        }
        failpoint("apply:after_file");
        let c = self
            .find_mut(&id)
            .ok_or_else(|| LedgerError::Damaged(format!("{id} vanished")))?;
        c.state = ChangeState::Active;
        let done = c.clone();
        self.save()?;
        Ok(done)
    }

    /// Mark `id` `reverting`, run `write` (which puts the file back), mark it `reverted`.
    pub fn revert_with(
        &mut self,
        id: &str,
        write: impl FnOnce(&Confined, &Path) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        let file = {
            let c = self
                .find_mut(id)
                .ok_or_else(|| LedgerError::Damaged(format!("{id} vanished")))?;
            c.state = ChangeState::Reverting;
            c.file.clone()
        };
        self.save()?;
        failpoint("revert:after_ledger");
        if let Err(e) = write(&self.fs, Path::new(&file)) {
            if let Some(c) = self.find_mut(id) {
                c.state = ChangeState::Active;
            }
            self.save()?;
            return Err(e);
        }
        failpoint("revert:after_file");
        if let Some(c) = self.find_mut(id) {
            c.state = ChangeState::Reverted;
            c.reverted_at = Some(now_rfc3339());
        }
        self.save()
    }
}

/// Now, RFC 3339 in UTC.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The permission bits of `path` (under the root).
pub fn mode_of(fs: &Confined, path: &Path) -> Result<u32, LedgerError> {
    Ok(fs.mode_and_links(path)?.0)
}
