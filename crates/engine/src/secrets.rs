//! Scrubbing a run's record and kept text files of the secrets of the environment its child
//! got (`model::secrets::Scrubber` decides; this is where the files are rewritten).

use std::io::{Read, Write};
use std::path::Path;
use system_profile_model::run::RunTarget;
use system_profile_model::secrets::Scrubber;
use system_profile_runner::Execution;

/// A run folder's text files are scrubbed up to this size each; past it a file is left as the
/// child wrote it and the run says so (rewriting gigabytes of output would cost more than the
/// run).
const SCRUB_FILE_CAP_BYTES: u64 = 256 << 20;

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

/// Rewrite `path` with secrets masked, atomically and only when something changed. The file
/// is opened without following a symlink, so a link placed in the run folder is not rewritten.
fn scrub_file(scrubber: &Scrubber, path: &Path) -> Result<(), ScrubFileError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(ScrubFileError::Io)?;
    let len = file.metadata().map_err(ScrubFileError::Io)?.len();
    if len > SCRUB_FILE_CAP_BYTES {
        return Err(ScrubFileError::TooBig);
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.read_to_end(&mut bytes).map_err(ScrubFileError::Io)?;
    let scrubbed = scrubber.bytes(&bytes);
    if scrubbed == bytes {
        return Ok(());
    }
    let mut temp = path.as_os_str().to_os_string();
    temp.push(".scrub.tmp");
    let write = || -> std::io::Result<()> {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&temp)?;
        out.write_all(&scrubbed)?;
        out.sync_all()?;
        std::fs::rename(&temp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        ScrubFileError::Io(e)
    })
}
