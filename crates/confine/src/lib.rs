//! The confined filesystem: every file the server reads or writes under its root (the
//! session folders, run folders, manifest, reports, the ledger, its backups and the files it
//! edits) goes through a `Confined` root. A path is resolved component by component beneath
//! the root's directory handle (cap-std: `openat2` with `RESOLVE_BENEATH` where the kernel has
//! it, else `openat` one component at a time with `O_NOFOLLOW`), so a symlink or a folder
//! swapped for one (`sub -> ../elsewhere`) cannot lead outside, and there is no gap between a
//! check and the use: a write happens through the handle of the folder that was resolved.
//! Symlinks that stay beneath the root are followed (a project may link its own folders).
//!
//! Paths given here are relative to the root; an absolute path is accepted only when it is
//! under the root's own path (it is made relative first).

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt, Permissions, PermissionsExt};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

/// What went wrong, for callers that answer differently (a missing file is often fine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfineErrorKind {
    /// The path leads outside the root (`..`, an absolute path elsewhere, a symlink out).
    Escape,
    NotFound,
    /// Something is already there where a new folder or file was to be made.
    Exists,
    Io,
}

#[derive(Debug, thiserror::Error)]
#[error("{}: {}", path.display(), message(*kind, source))]
pub struct ConfineError {
    pub path: PathBuf,
    kind: ConfineErrorKind,
    #[source]
    source: io::Error,
}

fn message(kind: ConfineErrorKind, source: &io::Error) -> String {
    match kind {
        ConfineErrorKind::Escape => format!(
            "leads outside the server's root (through a symlink, `..` or an absolute path), \
             so it is neither read nor written ({source})"
        ),
        ConfineErrorKind::Exists => format!(
            "already exists (a file, folder or symlink someone else put there); remove it or \
             start over in a new folder ({source})"
        ),
        _ => source.to_string(),
    }
}

impl ConfineError {
    pub fn kind(&self) -> ConfineErrorKind {
        self.kind
    }

    pub fn into_io(self) -> io::Error {
        io::Error::new(self.source.kind(), self.to_string())
    }

    fn new(path: &Path, source: io::Error) -> Self {
        // cap-std says "a path led outside of the filesystem" as PermissionDenied; our own
        // refusals of `..` and foreign absolute paths use the same kind and text.
        let text = source.to_string();
        let kind =
            if text.contains("outside of the filesystem") || text.contains("outside the root") {
                ConfineErrorKind::Escape
            } else {
                match source.kind() {
                    io::ErrorKind::NotFound => ConfineErrorKind::NotFound,
                    io::ErrorKind::AlreadyExists => ConfineErrorKind::Exists,
                    _ => ConfineErrorKind::Io,
                }
            };
        ConfineError {
            path: path.to_path_buf(),
            kind,
            source,
        }
    }
}

impl From<ConfineError> for io::Error {
    fn from(e: ConfineError) -> io::Error {
        e.into_io()
    }
}

pub type Result<T> = std::result::Result<T, ConfineError>;

/// A root directory, held open; every operation resolves beneath it.
#[derive(Debug)]
pub struct Confined {
    dir: Dir,
    path: PathBuf,
}

impl Confined {
    /// Open `root` (an absolute path, links already resolved by the caller if it wants).
    pub fn open(root: &Path) -> Result<Confined> {
        let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority())
            .map_err(|e| ConfineError::new(root, e))?;
        Ok(Confined {
            dir,
            path: root.to_path_buf(),
        })
    }

    /// The root's path as it was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `path` relative to the root: absolute paths must lie under it (lexically), and no
    /// relative one may start by climbing out.
    pub fn relative(&self, path: &Path) -> Result<PathBuf> {
        let rel = if path.is_absolute() {
            path.strip_prefix(&self.path)
                .map(Path::to_path_buf)
                .map_err(|_| ConfineError::new(path, escape()))?
        } else {
            path.to_path_buf()
        };
        if rel.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(ConfineError::new(path, escape()));
        }
        Ok(rel)
    }

    fn err(&self, path: &Path) -> impl FnOnce(io::Error) -> ConfineError + '_ {
        let shown = self.path.join(path);
        move |e| ConfineError::new(&shown, e)
    }

    /// The directory holding `rel` and the file name in it, the directory opened beneath the
    /// root (so a later swap of a parent by a symlink does not move where we write).
    fn parent_of<'p>(&self, rel: &'p Path) -> Result<(Dir, &'p std::ffi::OsStr)> {
        let name = rel
            .file_name()
            .ok_or_else(|| ConfineError::new(rel, io::Error::other("names no file")))?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        let dir = if parent.as_os_str().is_empty() {
            self.dir.try_clone().map_err(self.err(rel))?
        } else {
            self.dir.open_dir(parent).map_err(self.err(parent))?
        };
        Ok((dir, name))
    }

    pub fn read(&self, path: &Path) -> Result<Vec<u8>> {
        let rel = self.relative(path)?;
        self.dir.read(&rel).map_err(self.err(&rel))
    }

    pub fn read_to_string(&self, path: &Path) -> Result<String> {
        let rel = self.relative(path)?;
        self.dir.read_to_string(&rel).map_err(self.err(&rel))
    }

    /// At most `limit` bytes of a file, and whether it held more.
    pub fn read_capped(&self, path: &Path, limit: u64) -> Result<(Vec<u8>, bool)> {
        let mut file = self.open_read(path)?;
        let mut bytes = Vec::new();
        (&mut file)
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(self.err(path))?;
        let more = bytes.len() as u64 > limit;
        bytes.truncate(limit as usize);
        Ok((bytes, more))
    }

    /// A file opened for reading, as a std `File`.
    pub fn open_read(&self, path: &Path) -> Result<std::fs::File> {
        let rel = self.relative(path)?;
        let file = self.dir.open(&rel).map_err(self.err(&rel))?;
        Ok(file.into_std())
    }

    /// A new file for writing, which must not exist (not even as a symlink).
    pub fn create_new(&self, path: &Path, mode: u32) -> Result<std::fs::File> {
        let rel = self.relative(path)?;
        let (dir, name) = self.parent_of(&rel)?;
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true).mode(mode);
        let file = dir.open_with(name, &opts).map_err(self.err(&rel))?;
        Ok(file.into_std())
    }

    pub fn exists(&self, path: &Path) -> bool {
        self.relative(path)
            .is_ok_and(|rel| self.dir.metadata(&rel).is_ok())
    }

    pub fn is_dir(&self, path: &Path) -> bool {
        self.relative(path)
            .is_ok_and(|rel| self.dir.metadata(&rel).is_ok_and(|m| m.is_dir()))
    }

    /// The permission bits and link count of a file, following links beneath the root.
    pub fn mode_and_links(&self, path: &Path) -> Result<(u32, u64)> {
        use cap_std::fs::MetadataExt;
        let rel = self.relative(path)?;
        let m = self.dir.metadata(&rel).map_err(self.err(&rel))?;
        Ok((m.mode() & 0o7777, m.nlink()))
    }

    /// Whether the last component itself is a symlink (not followed).
    pub fn is_symlink(&self, path: &Path) -> bool {
        self.relative(path).is_ok_and(|rel| {
            self.dir
                .symlink_metadata(&rel)
                .is_ok_and(|m| m.file_type().is_symlink())
        })
    }

    pub fn create_dir_all(&self, path: &Path) -> Result<()> {
        let rel = self.relative(path)?;
        self.dir.create_dir_all(&rel).map_err(self.err(&rel))
    }

    /// Make a folder that must not exist yet: a symlink or anything else already there is
    /// `Exists`, never followed.
    pub fn create_dir_new(&self, path: &Path) -> Result<()> {
        let rel = self.relative(path)?;
        let (dir, name) = self.parent_of(&rel)?;
        dir.create_dir(name).map_err(self.err(&rel))
    }

    /// The names in a folder (not following a symlink at the folder itself out of the root).
    pub fn read_dir_names(&self, path: &Path) -> Result<Vec<String>> {
        let rel = self.relative(path)?;
        let entries = if rel.as_os_str().is_empty() {
            self.dir.entries()
        } else {
            self.dir.read_dir(&rel)
        }
        .map_err(self.err(&rel))?;
        Ok(entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect())
    }

    pub fn remove_file(&self, path: &Path) -> Result<()> {
        let rel = self.relative(path)?;
        let (dir, name) = self.parent_of(&rel)?;
        dir.remove_file(name).map_err(self.err(&rel))
    }

    /// Replace `path` with `bytes` atomically: a new temp file `temp_name` in the same folder
    /// (created exclusively, mode `mode`), fsync, `before_rename` (fault tests), rename within
    /// that folder's handle, fsync of the folder. The folder is resolved once: a parent swapped
    /// for a symlink meanwhile changes nothing.
    pub fn write_atomic(
        &self,
        path: &Path,
        temp_name: &str,
        bytes: &[u8],
        mode: u32,
        before_rename: impl FnOnce(),
    ) -> Result<()> {
        let rel = self.relative(path)?;
        let (dir, name) = self.parent_of(&rel)?;
        let _ = dir.remove_file(temp_name);
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true).mode(mode);
        let temp_rel = rel.with_file_name(temp_name);
        let mut file = dir
            .open_with(temp_name, &opts)
            .map_err(self.err(&temp_rel))?;
        let written = (|| {
            file.write_all(bytes)?;
            // create_new's mode is filtered by the umask; the file keeps the bits asked for.
            file.set_permissions(Permissions::from_mode(mode))?;
            file.sync_all()
        })();
        drop(file);
        if let Err(e) = written {
            let _ = dir.remove_file(temp_name);
            return Err(self.err(&temp_rel)(e));
        }
        before_rename();
        if let Err(e) = dir.rename(temp_name, &dir, name) {
            let _ = dir.remove_file(temp_name);
            return Err(self.err(&rel)(e));
        }
        // fsync of the folder makes the rename durable; opening "." keeps to the handle.
        dir.open(".")
            .and_then(|d| d.sync_all())
            .map_err(self.err(&rel))
    }

    /// fsync a folder, so a rename or removal in it is durable.
    pub fn sync_dir(&self, path: &Path) -> Result<()> {
        let rel = self.relative(path)?;
        let dir = if rel.as_os_str().is_empty() {
            self.dir.open(".")
        } else {
            self.dir.open_dir(&rel).and_then(|d| d.open("."))
        };
        dir.and_then(|d| d.sync_all()).map_err(self.err(&rel))
    }

    /// A confined view of a folder beneath this root (a session), itself a root.
    pub fn sub(&self, path: &Path) -> Result<Confined> {
        let rel = self.relative(path)?;
        let dir = self.dir.open_dir(&rel).map_err(self.err(&rel))?;
        Ok(Confined {
            dir,
            path: self.path.join(rel),
        })
    }
}

fn escape() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a path led outside the root",
    )
}

#[cfg(test)]
mod tests;
