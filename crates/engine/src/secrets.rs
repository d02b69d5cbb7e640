//! Scrubbing a run's record and kept text files of the secrets of the environment its child
//! got (`model::secrets::Scrubber` decides; this is where the files are rewritten).

use std::io::{Read, Write};
use std::path::Path;
use system_profile_model::run::RunTarget;
use system_profile_model::secrets::Scrubber;
use system_profile_runner::Execution;

/// A run folder's text files are scrubbed up to this size each (the default output cap);
/// past it a file is left as the child wrote it and the run says so.
const SCRUB_FILE_CAP_BYTES: u64 = 1 << 30;

pub fn scrub_target(scrubber: &Scrubber, target: &RunTarget) -> RunTarget {
    match target {
        RunTarget::Command { command, shell } => RunTarget::Command {
            command: scrubber.argv(command),
            shell: *shell,
        },
        other => other.clone(),
    }
}

pub fn scrub_execution(scrubber: &Scrubber, e: &mut Execution) {
    let mut scrubber = scrubber.clone();
    scrubber.learn_argv(&e.argv);
    let scrubber = &scrubber;
    e.argv = scrubber.argv(&e.argv);
    // Parsed metrics carry command lines (`time -v`'s, a tool's own).
    if let Ok(mut value) = serde_json::to_value(&e.metrics) {
        let before = value.clone();
        scrubber.json(&mut value);
        if value != before {
            match serde_json::from_value(value) {
                Ok(m) => e.metrics = m,
                Err(err) => tracing::warn!("metrics not scrubbed: {err}"),
            }
        }
    }
    e.stdout_tail = scrubber.text(&e.stdout_tail);
    e.stderr_tail = scrubber.text(&e.stderr_tail);
    for w in &mut e.warnings {
        *w = scrubber.text(w);
    }
    if let Some(err) = &mut e.error {
        *err = scrubber.text(err);
    }
    let mut too_big = Vec::new();
    for a in &e.artifacts {
        let is_text = a
            .path
            .extension()
            .is_some_and(|x| x == "txt" || x == "log" || x == "folded");
        if !is_text {
            continue;
        }
        match scrub_file(scrubber, &a.path) {
            Ok(()) => {}
            Err(ScrubFileError::TooBig) => too_big.push(a.path.display().to_string()),
            Err(ScrubFileError::Io(err)) => {
                tracing::warn!("{} not scrubbed: {err}", a.path.display());
            }
        }
    }
    for path in too_big {
        e.warnings.push(format!(
            "{path} is over {SCRUB_FILE_CAP_BYTES} bytes and was not scrubbed of secrets: it \
             holds what the program printed"
        ));
    }
}

enum ScrubFileError {
    TooBig,
    Io(std::io::Error),
}

/// Pieces a file is scrubbed in: cut after a newline when there is one, so a secret on one
/// line is never split between two pieces.
const SCRUB_CHUNK_BYTES: usize = 256 << 10;

/// Rewrite `path` with secrets masked, streaming (a piece at a time, so memory stays small
/// whatever the file weighs), atomically and only when something changed. The file is
/// opened without following a symlink, so a link placed in the run folder is not rewritten.
fn scrub_file(scrubber: &Scrubber, path: &Path) -> Result<(), ScrubFileError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(ScrubFileError::Io)?;
    let len = file.metadata().map_err(ScrubFileError::Io)?.len();
    if len > SCRUB_FILE_CAP_BYTES {
        return Err(ScrubFileError::TooBig);
    }
    let mut temp = path.as_os_str().to_os_string();
    temp.push(".scrub.tmp");
    let result = (|| -> std::io::Result<bool> {
        let mut out = std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&temp)?,
        );
        let mut reader = std::io::BufReader::with_capacity(SCRUB_CHUNK_BYTES, file);
        let mut carry: Vec<u8> = Vec::new();
        let mut changed = false;
        let mut piece = vec![0u8; SCRUB_CHUNK_BYTES];
        loop {
            let n = reader.read(&mut piece)?;
            if n > 0 {
                carry.extend_from_slice(&piece[..n]);
            }
            // Up to the last newline (or everything, at the end or past four pieces).
            let cut = if n == 0 || carry.len() > 4 * SCRUB_CHUNK_BYTES {
                carry.len()
            } else {
                match carry.iter().rposition(|b| *b == b'\n') {
                    Some(i) => i + 1,
                    None => continue,
                }
            };
            let scrubbed = scrubber.bytes(&carry[..cut]);
            changed |= scrubbed[..] != carry[..cut];
            out.write_all(&scrubbed)?;
            carry.drain(..cut);
            if n == 0 {
                break;
            }
        }
        if changed {
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&temp, path)?;
            // The rename is durable once its folder is synced (as `confine::write_atomic` does).
            let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
            std::fs::File::open(folder.unwrap_or(Path::new(".")))?.sync_all()?;
        }
        Ok(changed)
    })();
    match result {
        Ok(true) => Ok(()),
        Ok(false) => {
            let _ = std::fs::remove_file(&temp);
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(ScrubFileError::Io(e))
        }
    }
}
