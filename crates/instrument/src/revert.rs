//! `revert_changes`: each change undone newest first, so every file steps back through the
//! states the ledger recorded and each step is checked by hash. A file edited by someone
//! else since is undone three-way (their edits kept, ours taken out) when that merges
//! cleanly and compiles; otherwise it is left alone and reported as a conflict with the
//! foreign diff, unless `force`, which restores the original and keeps the edited bytes.

use crate::ledger::{
    failpoint, sha256_hex, temp_path, write_atomic, LedgerError, LedgerStore, BACKUP_DIR,
};
use crate::python::Python;
use crate::{refused, unified_diff, InstrumentConfig, InstrumentError};
use std::path::Path;
use system_profile_confine::{ConfineErrorKind, Confined};
use system_profile_model::instrument::{
    Change, ChangeRole, ChangeState, ChangeType, RevertChangesInput, RevertOutcome, RevertResult,
    RevertedChange,
};

fn id_number(id: &str) -> u32 {
    id.trim_start_matches('c').parse().unwrap_or(0)
}

/// Where the bytes a change left are kept (for three-way undo and conflict diffs).
pub(crate) fn after_backup(c: &Change) -> String {
    match &c.backup {
        Some(b) => format!("{b}.after"),
        None => format!("{BACKUP_DIR}/{}.after", c.id),
    }
}

pub fn revert(
    config: &InstrumentConfig,
    input: &RevertChangesInput,
) -> Result<RevertResult, InstrumentError> {
    if !input.all && input.ids.is_empty() {
        return Err(refused(
            "ids",
            "give the change ids to revert, or all: true",
        ));
    }
    let mut store = LedgerStore::open(&config.root)?;
    let mut selected: Vec<String> = if input.all {
        store
            .ledger
            .changes
            .iter()
            .filter(|c| c.state == ChangeState::Active)
            .map(|c| c.id.clone())
            .collect()
    } else {
        for id in &input.ids {
            if store.find(id).is_none() {
                let known: Vec<&str> = store.ledger.changes.iter().map(|c| c.id.as_str()).collect();
                return Err(refused(
                    "ids",
                    format!(
                        "no change {id} in the ledger; it holds: {}",
                        if known.is_empty() {
                            "nothing".into()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            }
        }
        input.ids.clone()
    };
    // A change others need (the helper, a file's helper import) goes when all of them go.
    loop {
        let before = selected.len();
        let needed: Vec<String> = store
            .ledger
            .changes
            .iter()
            .filter(|c| c.state == ChangeState::Active && !selected.contains(&c.id))
            .filter(|c| {
                store
                    .ledger
                    .changes
                    .iter()
                    .any(|u| u.requires.contains(&c.id))
            })
            .map(|c| c.id.clone())
            .collect();
        for h in needed {
            let users_stay = store.ledger.changes.iter().any(|u| {
                u.state == ChangeState::Active
                    && u.requires.contains(&h)
                    && !selected.contains(&u.id)
            });
            if !users_stay {
                selected.push(h);
            }
        }
        if selected.len() == before {
            break;
        }
    }
    selected.sort_by_key(|id| std::cmp::Reverse(id_number(id)));
    selected.dedup();
    let mut py: Option<Python> = None;
    let mut reverted = Vec::new();
    for id in &selected {
        // A helper still needed by a change that could not be undone stays.
        let still_needed = store
            .ledger
            .changes
            .iter()
            .any(|u| u.state == ChangeState::Active && u.requires.contains(id));
        if still_needed {
            let c = store.find(id).cloned();
            if let Some(c) = c {
                reverted.push(RevertedChange {
                    id: c.id,
                    file: c.file,
                    outcome: RevertOutcome::Conflict,
                    message: "kept: a change that is still in place calls it".into(),
                    foreign_diff: None,
                    kept: None,
                });
            }
            continue;
        }
        reverted.push(revert_one(&mut store, config, id, input.force, &mut py)?);
    }
    let active = store
        .ledger
        .changes
        .iter()
        .filter(|c| c.state == ChangeState::Active)
        .count() as u32;
    let complete = reverted.iter().all(|r| {
        matches!(
            r.outcome,
            RevertOutcome::Restored
                | RevertOutcome::Deleted
                | RevertOutcome::Merged
                | RevertOutcome::Forced
                | RevertOutcome::AlreadyReverted
        )
    });
    Ok(RevertResult {
        reverted,
        active,
        complete,
    })
}

fn outcome(c: &Change, outcome: RevertOutcome, message: impl Into<String>) -> RevertedChange {
    RevertedChange {
        id: c.id.clone(),
        file: c.file.clone(),
        outcome,
        message: message.into(),
        foreign_diff: None,
        kept: None,
    }
}

/// Keep bytes someone else wrote before we overwrite or delete them.
fn keep_foreign(store: &LedgerStore, c: &Change, bytes: &[u8]) -> Result<String, LedgerError> {
    let mut n = 1;
    while store
        .fs
        .exists(Path::new(&format!("{BACKUP_DIR}/{}.kept{n}", c.id)))
    {
        n += 1;
    }
    store.write_backup(&format!("{}.kept{n}", c.id), bytes)
}

fn read_current(store: &LedgerStore, c: &Change) -> Result<Option<Vec<u8>>, LedgerError> {
    match store.fs.read(Path::new(&c.file)) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == ConfineErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn revert_one(
    store: &mut LedgerStore,
    config: &InstrumentConfig,
    id: &str,
    force: bool,
    py: &mut Option<Python>,
) -> Result<RevertedChange, InstrumentError> {
    let Some(c) = store.find(id).cloned() else {
        return Err(refused("ids", format!("no change {id}")));
    };
    if c.state == ChangeState::Reverted {
        return Ok(outcome(
            &c,
            RevertOutcome::AlreadyReverted,
            "reverted before",
        ));
    }
    let current = read_current(store, &c)?;
    let current_hash = current.as_deref().map(sha256_hex);
    match c.change_type {
        ChangeType::Created => revert_created(store, &c, current, current_hash, force),
        ChangeType::Modified => {
            revert_modified(store, config, &c, current, current_hash, force, py)
        }
    }
}

fn revert_created(
    store: &mut LedgerStore,
    c: &Change,
    current: Option<Vec<u8>>,
    current_hash: Option<String>,
    force: bool,
) -> Result<RevertedChange, InstrumentError> {
    let Some(bytes) = current else {
        store.revert_with(&c.id, |_, _| Ok(()))?;
        return Ok(outcome(c, RevertOutcome::Deleted, "already gone"));
    };
    let remove = |fs: &Confined, p: &Path| -> Result<(), LedgerError> {
        match fs.remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == ConfineErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        if let Some(dir) = p.parent() {
            fs.sync_dir(dir)?;
        }
        Ok(())
    };
    if current_hash.as_deref() == Some(c.sha256_after.as_str()) {
        store.revert_with(&c.id, remove)?;
        let _ = store.fs.remove_file(Path::new(&after_backup(c)));
        return Ok(outcome(
            c,
            RevertOutcome::Deleted,
            "deleted; it was as we made it",
        ));
    }
    if force {
        let kept = keep_foreign(store, c, &bytes)?;
        store.revert_with(&c.id, remove)?;
        let mut r = outcome(
            c,
            RevertOutcome::Forced,
            format!("deleted; it had been edited, the edited file is kept as {kept}"),
        );
        r.kept = Some(kept);
        return Ok(r);
    }
    let ours = store
        .fs
        .read(Path::new(&after_backup(c)))
        .unwrap_or_default();
    let mut r = outcome(
        c,
        RevertOutcome::Conflict,
        "edited since we created it: left in place; revert with force: true to delete it (the edited bytes are kept)",
    );
    r.foreign_diff = Some(unified_diff(&c.file, &ours, &bytes, false));
    Ok(r)
}

fn revert_modified(
    store: &mut LedgerStore,
    config: &InstrumentConfig,
    c: &Change,
    current: Option<Vec<u8>>,
    current_hash: Option<String>,
    force: bool,
    py: &mut Option<Python>,
) -> Result<RevertedChange, InstrumentError> {
    let (Some(backup), Some(sha_before)) = (&c.backup, &c.sha256_before) else {
        return Ok(outcome(
            c,
            RevertOutcome::Failed,
            "the ledger entry has no backup: nothing done",
        ));
    };
    let before = match store.read_backup(backup, sha_before) {
        Ok(b) => b,
        Err(e) => {
            return Ok(outcome(
                c,
                RevertOutcome::Failed,
                format!("{e}; nothing done"),
            ))
        }
    };
    let mode = c.mode.unwrap_or(0o644);
    let restore = |bytes: Vec<u8>, want: Option<String>| {
        let id = c.id.clone();
        move |fs: &Confined, p: &Path| -> Result<(), LedgerError> {
            write_atomic(
                fs,
                p,
                &temp_path(p, &id),
                &bytes,
                mode,
                Some("revert:before_rename"),
            )?;
            let back = fs.read(p)?;
            if let Some(want) = want {
                if sha256_hex(&back) != want {
                    return Err(LedgerError::Damaged(format!(
                        "{} does not read back as written",
                        p.display()
                    )));
                }
            }
            Ok(())
        }
    };
    if current_hash.as_deref() == Some(c.sha256_after.as_str()) {
        store.revert_with(&c.id, restore(before, Some(sha_before.clone())))?;
        return Ok(outcome(
            c,
            RevertOutcome::Restored,
            "original bytes restored, sha256 verified",
        ));
    }
    let after = store.read_backup(&after_backup(c), &c.sha256_after).ok();
    if let Some(cur) = &current {
        let python = match py {
            Some(p) => Some(p),
            None => {
                *py = Python::start(&config.python).ok();
                py.as_mut()
            }
        };
        // Three-way first (their edits kept, ours out); where our lines and theirs touch, take
        // ours out by their markers instead.
        let merged = after
            .as_deref()
            .and_then(|after| diffy::merge_bytes(after, cur, &before).ok())
            .map(|m| (m, "three-way"));
        let mut result = None;
        if let Some(p) = python {
            let path = store.abs(&c.file);
            let fits = |bytes: &[u8], p: &mut Python| {
                ours_gone(c, bytes) && p.compile(&path, bytes).is_ok()
            };
            if let Some((bytes, how)) = merged {
                if fits(&bytes, p) {
                    result = Some((bytes, how));
                }
            }
            if result.is_none() {
                if let Ok(bytes) = p.unmark(cur, &c.id) {
                    if fits(&bytes, p) {
                        result = Some((bytes, "by its markers"));
                    }
                }
            }
        }
        if let Some((merged, how)) = result {
            if let Some(after) = &after {
                rebase_later(store, c, after, &before)?;
            }
            let want = sha256_hex(&merged);
            store.revert_with(&c.id, restore(merged, Some(want)))?;
            return Ok(outcome(
                c,
                RevertOutcome::Merged,
                format!("the file had other edits since: our lines were taken out ({how}) and the other edits kept; it compiles"),
            ));
        }
    }
    if force {
        let kept = match &current {
            Some(cur) => Some(keep_foreign(store, c, cur)?),
            None => None,
        };
        store.revert_with(&c.id, restore(before, Some(sha_before.clone())))?;
        let mut r = outcome(
            c,
            RevertOutcome::Forced,
            match &kept {
                Some(k) => {
                    format!("original restored over other edits; the edited file is kept as {k}")
                }
                None => "the file was gone; original restored".into(),
            },
        );
        r.kept = kept;
        return Ok(r);
    }
    let mut r = outcome(
        c,
        RevertOutcome::Conflict,
        match &current {
            Some(_) => "edited since we changed it, and taking our lines out does not merge cleanly: left as it is. Resolve by hand, or revert with force: true (the edited bytes are kept)",
            None => "the file is gone: nothing restored. Revert with force: true to put the original back",
        },
    );
    r.foreign_diff = Some(unified_diff(
        &c.file,
        after.as_deref().unwrap_or_default(),
        current.as_deref().unwrap_or_default(),
        false,
    ));
    Ok(r)
}

/// Whether nothing of `c` is left in `bytes`: no line with its marker, no call that names it
/// (a line whose marker someone edited away still does), and for the helper import, no use
/// of the helper at all.
fn ours_gone(c: &Change, bytes: &[u8]) -> bool {
    let named = [
        crate::edit::marker(&c.id),
        format!("\"{}\"", c.id),
        format!("_sp_{}", c.id),
    ];
    if named.iter().any(|n| crate::contains(bytes, n.as_bytes())) {
        return false;
    }
    c.role != ChangeRole::HelperImport || !crate::contains(bytes, b"_sp_profile")
}

/// After `c` was taken out of a file three-way, our later changes to the same file get
/// backups without `c`'s lines, so each can still be undone exactly.
fn rebase_later(
    store: &mut LedgerStore,
    c: &Change,
    after_c: &[u8],
    before_c: &[u8],
) -> Result<(), InstrumentError> {
    let later: Vec<Change> = store
        .ledger
        .changes
        .iter()
        .filter(|k| {
            k.file == c.file
                && k.state == ChangeState::Active
                && k.change_type == ChangeType::Modified
                && id_number(&k.id) > id_number(&c.id)
        })
        .cloned()
        .collect();
    let mut changed = false;
    for k in later {
        let (Some(backup), Some(sha_before)) = (&k.backup, &k.sha256_before) else {
            continue;
        };
        let (Ok(before_k), Ok(after_k)) = (
            store.read_backup(backup, sha_before),
            store.read_backup(&after_backup(&k), &k.sha256_after),
        ) else {
            continue;
        };
        let (Ok(nb), Ok(na)) = (
            diffy::merge_bytes(after_c, &before_k, before_c),
            diffy::merge_bytes(after_c, &after_k, before_c),
        ) else {
            continue;
        };
        let name = format!("{}.r{}", k.id, c.id);
        let new_backup = store.write_backup(&name, &nb)?;
        store.write_backup(&format!("{name}.after"), &na)?;
        if let Some(entry) = store.find_mut(&k.id) {
            entry.backup = Some(new_backup);
            entry.sha256_before = Some(sha256_hex(&nb));
            entry.sha256_after = sha256_hex(&na);
            changed = true;
        }
    }
    if changed {
        store.save()?;
        failpoint("revert:after_rebase");
    }
    Ok(())
}
