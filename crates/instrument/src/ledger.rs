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
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
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
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LedgerError + '_ {
    move |source| LedgerError::Io {
        path: path.to_path_buf(),
        source,
    }
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

fn fsync_dir(dir: &Path) -> Result<(), LedgerError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// The temp file an atomic write of `path` for change `id` goes through; settling a crashed
/// change removes it.
pub fn temp_path(path: &Path, id: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.sp-{id}.tmp"))
}

/// Write `bytes` to `path` atomically with permission bits `mode`, through `temp`.
pub fn write_atomic(
    path: &Path,
    temp: &Path,
    bytes: &[u8],
    mode: u32,
    failpoint_name: Option<&str>,
) -> Result<(), LedgerError> {
    let _ = fs::remove_file(temp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(temp)
        .map_err(io_err(temp))?;
    let result = (|| {
        f.write_all(bytes)?;
        // create_new's mode is filtered by the umask; the file keeps the bits it had.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(temp);
        return Err(LedgerError::Io {
            path: temp.to_path_buf(),
            source: e,
        });
    }
    drop(f);
    if let Some(name) = failpoint_name {
        failpoint(name);
    }
    fs::rename(temp, path).map_err(|e| {
        let _ = fs::remove_file(temp);
        LedgerError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    })?;
    fsync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// `profile_output/` under `root`, made when missing, with a `.gitignore` of `*` so that
/// nothing we write there shows in the user's `git status`.
pub fn output_dir(root: &Path) -> Result<PathBuf, LedgerError> {
    let dir = root.join(OUTPUT_DIR);
    fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        let temp = dir.join(".gitignore.tmp");
        write_atomic(
            &ignore,
            &temp,
            b"# written by system-profile: nothing here is source\n*\n",
            0o644,
            None,
        )?;
    }
    Ok(dir)
}

/// The ledger, locked for this process while the value lives.
pub struct LedgerStore {
    root: PathBuf,
    path: PathBuf,
    _lock: File,
    pub ledger: Ledger,
}

impl LedgerStore {
    /// Lock, read (an absent ledger is an empty one), and settle what a crash left.
    pub fn open(root: &Path) -> Result<LedgerStore, LedgerError> {
        let dir = output_dir(root)?;
        fs::create_dir_all(root.join(BACKUP_DIR)).map_err(io_err(&root.join(BACKUP_DIR)))?;
        let lock_path = dir.join("ledger.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        // SAFETY: flock on a descriptor we own; blocks until another server lets go.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(LedgerError::Io {
                path: lock_path,
                source: io::Error::last_os_error(),
            });
        }
        let path = root.join(LEDGER_FILE);
        let ledger = match fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice::<Ledger>(&bytes).map_err(|e| LedgerError::Unreadable {
                    path: path.clone(),
                    detail: e.to_string(),
                })?
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ledger {
                version: LEDGER_VERSION,
                next_id: 1,
                changes: Vec::new(),
            },
            Err(e) => return Err(LedgerError::Io { path, source: e }),
        };
        if ledger.version > LEDGER_VERSION {
            return Err(LedgerError::Unreadable {
                path,
                detail: format!("version {}", ledger.version),
            });
        }
        let mut store = LedgerStore {
            root: root.to_path_buf(),
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
        let path = self.abs(rel);
        match fs::read(&path) {
            Ok(b) => Ok(Some(sha256_hex(&b))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LedgerError::Io { path, source: e }),
        }
    }

    /// Settle changes a crash left in `applying` or `reverting`; true when any moved.
    fn settle(&mut self) -> Result<bool, LedgerError> {
        let mut changed = false;
        let mut drop_ids = Vec::new();
        for i in 0..self.ledger.changes.len() {
            let c = &self.ledger.changes[i];
            let _ = fs::remove_file(temp_path(&self.abs(&c.file), &c.id));
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
                let _ = fs::remove_file(self.root.join(BACKUP_DIR).join(format!("{id}{suffix}")));
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
        let path = self.abs(&rel);
        write_atomic(&path, &path.with_extension("tmp"), bytes, 0o600, None)?;
        Ok(rel)
    }

    /// Read a backup and check it is what the ledger says it is.
    pub fn read_backup(&self, rel: &str, sha256: &str) -> Result<Vec<u8>, LedgerError> {
        let path = self.abs(rel);
        let bytes = fs::read(&path).map_err(io_err(&path))?;
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
        let path = self.abs(&change.file);
        let mode = change.mode.unwrap_or(0o644);
        self.ledger.changes.push(change);
        self.save()?;
        failpoint("apply:after_ledger");
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let written = write_atomic(
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
        write: impl FnOnce(&Path) -> Result<(), LedgerError>,
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
        let path = self.abs(&file);
        if let Err(e) = write(&path) {
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

/// The permission bits of `path`.
pub fn mode_of(path: &Path) -> Result<u32, LedgerError> {
    Ok(fs::metadata(path)
        .map_err(io_err(path))?
        .permissions()
        .mode()
        & 0o7777)
}
