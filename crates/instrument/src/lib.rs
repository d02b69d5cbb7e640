//! Step 4 of `/system-profile`: measurement code put into the user's Python files, and the
//! ledger that lets every change be listed and undone byte for byte.
//!
//! This crate owns `instrument_file`, `list_changes` and `revert_changes`: the strategies
//! (`runner`, `decorator`, `context`, `inline`) computed on the file's real syntax tree from
//! the target's own interpreter, the compile check before anything is kept, the runtime
//! helper `_sp_profile.py` the edits call, and `profile_output/ledger.json` with its backups,
//! written so that a crash at any point leaves either the old file or the new one with its
//! entry. It does its IO synchronously; callers on an async runtime use a blocking thread.

pub mod edit;
pub mod ledger;
pub mod python;
mod revert;
pub mod source;

use edit::{EditContext, Sampling};
use ledger::{mode_of, now_rfc3339, sha256_hex, LedgerError, LedgerStore};
use python::{Python, PythonError};
use source::Source;
use std::fs;
use std::path::{Component, Path, PathBuf};
use system_profile_model::instrument::{
    Change, ChangeList, ChangeMade, ChangeRole, ChangeRow, ChangeState, ChangeType,
    InstrumentFileInput, InstrumentResult, LineRange, ListChangesInput, Measure,
    RevertChangesInput, RevertResult, Strategy,
};

pub use ledger::{output_dir, BACKUP_DIR, LEDGER_FILE};

/// The helper every edit calls, as installed under `profile_output/instrument/`.
pub const HELPER_SOURCE: &str = include_str!("../python/_sp_profile.py");
/// Where the helper, runners and the log live, relative to the root.
pub const INSTRUMENT_DIR: &str = "profile_output/instrument";
pub const HELPER_FILE: &str = "profile_output/instrument/_sp_profile.py";
pub const LOG_FILE: &str = "profile_output/instrument/measure.jsonl";
/// Files larger than this are not Python sources anyone instruments by hand.
const MAX_SOURCE_BYTES: u64 = 16 << 20;

/// Why a call did nothing.
#[derive(Debug, thiserror::Error)]
pub enum InstrumentError {
    /// The input asks for something we will not do; `field` says which input to fix.
    #[error("invalid `{field}`: {message}")]
    Refused {
        field: &'static str,
        message: String,
    },
    #[error(transparent)]
    Python(#[from] PythonError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

pub(crate) fn refused(field: &'static str, message: impl Into<String>) -> InstrumentError {
    InstrumentError::Refused {
        field,
        message: message.into(),
    }
}

/// Where and with what `instrument_file` works.
#[derive(Debug, Clone)]
pub struct InstrumentConfig {
    /// Absolute, links resolved.
    pub root: PathBuf,
    /// The interpreter when the input names none.
    pub python: String,
}

/// `path` relative to `root`, checked: under the root by its own components (no `..` out, no
/// symbolic link anywhere below the root), a regular file, text, not ours.
pub fn resolve_source(root: &Path, path: &str) -> Result<(PathBuf, String), InstrumentError> {
    let path = path.trim();
    if path.is_empty() {
        return Err(refused(
            "path",
            "empty path; give a Python file relative to the root",
        ));
    }
    let given = Path::new(path);
    let rel: PathBuf = if given.is_absolute() {
        given
            .strip_prefix(root)
            .map_err(|_| {
                refused(
                    "path",
                    format!(
                        "{path} is outside the server's root {}: only files under it are changed",
                        root.display()
                    ),
                )
            })?
            .to_path_buf()
    } else {
        given.to_path_buf()
    };
    let mut clean = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => clean.push(p),
            Component::CurDir => {}
            _ => {
                return Err(refused(
                    "path",
                    format!(
                    "{path} leaves the server's root {} (`..`): only files under it are changed",
                    root.display()
                ),
                ))
            }
        }
    }
    let mut at = root.to_path_buf();
    for c in clean.components() {
        at.push(c);
        let meta = fs::symlink_metadata(&at).map_err(|e| {
            refused(
                "path",
                format!(
                    "{}: {e}; give a path relative to {}",
                    at.display(),
                    root.display()
                ),
            )
        })?;
        if meta.file_type().is_symlink() {
            return Err(refused(
                "path",
                format!(
                    "{} is a symbolic link: give the real file's path (links are not followed, so a change cannot land outside the root)",
                    at.display()
                ),
            ));
        }
    }
    let meta = fs::metadata(&at).map_err(|e| refused("path", format!("{}: {e}", at.display())))?;
    if !meta.is_file() {
        return Err(refused(
            "path",
            format!("{} is not a regular file", at.display()),
        ));
    }
    // Our writes replace the file (temp + rename): a hard link would be silently split from
    // its other names, which may lie outside the root.
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            return Err(refused(
                "path",
                format!(
                    "{} has {} hard links: a change would split it from its other names (one may be outside the root); copy it to a file of its own first",
                    at.display(),
                    meta.nlink()
                ),
            ));
        }
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(refused(
            "path",
            format!(
                "{} is {} bytes: not a Python source to edit",
                at.display(),
                meta.len()
            ),
        ));
    }
    let rel_str = clean.to_string_lossy().into_owned();
    if rel_str == ledger::OUTPUT_DIR || rel_str.starts_with("profile_output/") {
        return Err(refused(
            "path",
            "files under profile_output/ are system-profile's own",
        ));
    }
    Ok((at, rel_str))
}

fn check_input(input: &InstrumentFileInput) -> Result<Sampling, InstrumentError> {
    match (&input.function, &input.lines) {
        (None, None) => {
            return Err(refused(
                "function",
                "name a function (`Trainer.step`) or give `lines`",
            ))
        }
        (Some(_), Some(_)) => return Err(refused("lines", "give `function` or `lines`, not both")),
        _ => {}
    }
    if input.lines.is_some() && matches!(input.strategy, Strategy::Runner | Strategy::Decorator) {
        return Err(refused(
            "strategy",
            "runner and decorator wrap functions; for `lines` use context (or inline)",
        ));
    }
    if let Some(f) = &input.function {
        if f.contains(',') && matches!(input.strategy, Strategy::Context | Strategy::Inline) {
            return Err(refused("function", "context and inline take one function"));
        }
    }
    match (input.measure, &input.snippet) {
        (Measure::Custom, None) => {
            return Err(refused(
                "snippet",
                "measure custom needs the snippet to insert",
            ))
        }
        (Measure::Custom, Some(s)) if s.trim().is_empty() => {
            return Err(refused("snippet", "the snippet is empty"))
        }
        (Measure::Custom, Some(_)) if input.strategy != Strategy::Inline => {
            return Err(refused("strategy", "a custom snippet goes in inline"))
        }
        (m, Some(_)) if m != Measure::Custom => {
            return Err(refused(
                "snippet",
                "a snippet goes with measure custom only",
            ))
        }
        _ => {}
    }
    let every = input.sample_every.unwrap_or(1);
    if every == 0 {
        return Err(refused("sample_every", "0: give 1 (every call) or more"));
    }
    if let Some(r) = input.sample_rate {
        if !(r > 0.0 && r <= 1.0) {
            return Err(refused(
                "sample_rate",
                format!("{r}: give a fraction in (0, 1]"),
            ));
        }
    }
    Ok(Sampling {
        every,
        rate: input.sample_rate.filter(|r| *r < 1.0),
    })
}

fn unified_diff(name: &str, old: &[u8], new: &[u8], created: bool) -> String {
    let mut opts = diffy::DiffOptions::new();
    let old_name = if created {
        "/dev/null".to_string()
    } else {
        format!("a/{name}")
    };
    opts.set_original_filename(old_name);
    let new_name = format!("b/{name}");
    opts.set_modified_filename(new_name);
    // A file in another encoding (latin-1 with its coding line) is shown byte for char rather
    // than as replacement characters.
    String::from_utf8(opts.create_patch_bytes(old, new).to_bytes())
        .unwrap_or_else(|e| e.into_bytes().iter().map(|&b| b as char).collect())
}

/// The helper's active ledger entry when its file is as we left it; `None` when it must be
/// installed (again).
fn helper_in_place(store: &mut LedgerStore) -> Result<Option<String>, InstrumentError> {
    let live = store
        .ledger
        .changes
        .iter()
        .find(|c| c.file == HELPER_FILE && c.state == ChangeState::Active)
        .cloned();
    if let Some(c) = live {
        match store.current_hash(HELPER_FILE)? {
            Some(h) if h == c.sha256_after => return Ok(Some(c.id)),
            Some(_) => {
                return Err(refused(
                    "path",
                    format!("{HELPER_FILE} was edited since {} installed it; revert_changes {{\"ids\": [\"{}\"], \"force\": true}} first", c.id, c.id),
                ))
            }
            None => {
                // Deleted by hand: that change is over; a new one installs it again.
                if let Some(old) = store.find_mut(&c.id) {
                    old.state = ChangeState::Reverted;
                    old.reverted_at = Some(now_rfc3339());
                }
                store.save()?;
            }
        }
    } else if store.fs.exists(Path::new(HELPER_FILE)) {
        return Err(refused(
            "path",
            format!("{HELPER_FILE} exists and no ledger entry made it: move it away first"),
        ));
    }
    Ok(None)
}

/// The file's helper import change when it is in place (active, its marked line there).
fn import_in_place(store: &LedgerStore, rel: &str, current: &[u8]) -> Option<String> {
    store
        .ledger
        .changes
        .iter()
        .rev()
        .find(|c| {
            c.file == rel
                && c.role == ChangeRole::HelperImport
                && c.state == ChangeState::Active
                && contains(current, edit::marker(&c.id).as_bytes())
        })
        .map(|c| c.id.clone())
}

pub(crate) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// A change computed and compiled, not yet written.
struct Planned {
    change: Change,
    before: Option<Vec<u8>>,
    after: Vec<u8>,
}

impl Planned {
    fn made(&self) -> ChangeMade {
        ChangeMade {
            id: self.change.id.clone(),
            file: self.change.file.clone(),
            change_type: self.change.change_type,
            description: self.change.description.clone(),
            lines: self.change.lines.clone(),
            diff: unified_diff(
                &self.change.file,
                self.before.as_deref().unwrap_or(b""),
                &self.after,
                self.before.is_none(),
            ),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn planned(
    id: &str,
    file: &str,
    role: ChangeRole,
    (description, description_ja): (String, String),
    input: Option<&InstrumentFileInput>,
    lines: Vec<LineRange>,
    before: Option<Vec<u8>>,
    after: Vec<u8>,
    mode: Option<u32>,
    requires: Vec<String>,
) -> Planned {
    Planned {
        change: Change {
            id: id.to_string(),
            file: file.to_string(),
            change_type: if before.is_some() {
                ChangeType::Modified
            } else {
                ChangeType::Created
            },
            role,
            description,
            description_ja: Some(description_ja),
            measure: input.map(|i| i.measure),
            strategy: input.map(|i| i.strategy),
            lines,
            sha256_before: before.as_deref().map(sha256_hex),
            sha256_after: sha256_hex(&after),
            backup: None,
            mode,
            requires,
            state: ChangeState::Applying,
            created_at: now_rfc3339(),
            reverted_at: None,
        },
        before,
        after,
    }
}

/// Backups first (the original, and what we leave, for a three-way undo later), then the
/// ledger, then the file.
fn commit(store: &mut LedgerStore, mut p: Planned) -> Result<(), InstrumentError> {
    let id = p.change.id.clone();
    store.write_backup(&format!("{id}.after"), &p.after)?;
    if let Some(old) = &p.before {
        p.change.backup = Some(store.write_backup(&id, old)?);
    }
    store.apply(p.change, &p.after)?;
    Ok(())
}

/// The line of ours that imports the helper (`edit::import_line`).
fn is_helper_import(line: &str) -> bool {
    line.contains("import _sp_profile") && line.contains("# [PROFILE] ")
}

/// `instrument_file`.
pub fn instrument(
    config: &InstrumentConfig,
    input: &InstrumentFileInput,
) -> Result<InstrumentResult, InstrumentError> {
    let sampling = check_input(input)?;
    let (abs, rel) = resolve_source(&config.root, &input.path)?;
    // Read beneath the root: a folder swapped for a symlink since the check above is refused.
    let original = system_profile_confine::Confined::open(&config.root)
        .and_then(|fs| fs.read(Path::new(&rel)))
        .map_err(|e| refused("path", e.to_string()))?;
    if original.contains(&0) {
        return Err(refused(
            "path",
            format!("{rel} holds NUL bytes: it is not a Python source"),
        ));
    }
    let python_name = input
        .python
        .clone()
        .unwrap_or_else(|| config.python.clone());
    let mut py = Python::start(&python_name)?;
    let analysis = py.analyze(&abs).map_err(|e| match e {
        PythonError::Refused(m) => refused(
            "path",
            format!("{rel} does not parse with {python_name}: {m}"),
        ),
        e => e.into(),
    })?;
    py.compile(&abs, &original).map_err(|e| match e {
        PythonError::Refused(m) => refused(
            "path",
            format!("{rel} does not compile with {python_name} as it is ({m}): fix it first, or name the interpreter that runs it (`python`)"),
        ),
        e => e.into(),
    })?;
    let mut store = LedgerStore::open(&config.root)?;
    let helper_dir = config
        .root
        .join(INSTRUMENT_DIR)
        .to_string_lossy()
        .into_owned();
    let mode = mode_of(&store.fs, Path::new(&rel))?;
    // Ids are taken in memory and kept only when the ledger is saved with their change: a
    // refused or dry run consumes none.
    let helper_live = helper_in_place(&mut store)?;
    let helper_id = match &helper_live {
        Some(h) => h.clone(),
        None if input.measure != Measure::Custom => store.next_id(),
        None => String::new(),
    };
    let edits_file = input.strategy != Strategy::Runner;
    let needs_import = edits_file && input.measure != Measure::Custom;
    let import_live = if needs_import {
        import_in_place(&store, &rel, &original)
    } else {
        None
    };
    let import_new = if needs_import && import_live.is_none() {
        Some(store.next_id())
    } else {
        None
    };
    let id = store.next_id();
    let ctx = EditContext {
        id: &id,
        measure: input.measure,
        sampling,
        rel: &rel,
        snippet: input.snippet.as_deref(),
    };
    let src = Source::new(original.clone());
    let mut plans: Vec<Planned> = Vec::new();
    if helper_live.is_none() && input.measure != Measure::Custom {
        plans.push(planned(
            &helper_id,
            HELPER_FILE,
            ChangeRole::Helper,
            (
                "runtime helper _sp_profile.py that the instrumentation calls (timing, CUDA events, transfers, memory, duplicates, collectives → measure.jsonl)".into(),
                "計測コードが呼ぶ実行時ヘルパー _sp_profile.py（時間、CUDA イベント、転送、メモリ、重複、集団通信 → measure.jsonl）".into(),
            ),
            None,
            Vec::new(),
            None,
            HELPER_SOURCE.as_bytes().to_vec(),
            Some(0o644),
            Vec::new(),
        ));
    }
    let mut requires = Vec::new();
    let place;
    if let Some(import_id) = &import_new {
        let (with_import, ranges) =
            src.apply(&edit::seed(&analysis, &src, Some(import_id), &helper_dir)?);
        let lines: Vec<LineRange> = ranges
            .iter()
            .map(|&(s, e)| LineRange {
                start: s as u32,
                end: e as u32,
            })
            .collect();
        plans.push(planned(
            import_id,
            &rel,
            ChangeRole::HelperImport,
            (
                "helper import line (`import _sp_profile`) for this file's measurements".into(),
                "このファイルの計測のためのヘルパー import 行（`import _sp_profile`）".into(),
            ),
            None,
            lines,
            Some(original.clone()),
            with_import.into_bytes(),
            Some(mode),
            vec![helper_id.clone()],
        ));
    }
    if let Some(i) = import_new.as_ref().or(import_live.as_ref()) {
        requires.push(i.clone());
    }
    if input.measure != Measure::Custom {
        requires.push(helper_id.clone());
    }
    if edits_file {
        let edits = edit::seed(&analysis, &src, import_new.as_deref(), &helper_dir)?;
        let fe = match input.strategy {
            Strategy::Decorator => {
                let functions = edit::resolve_functions(
                    &analysis,
                    input.function.as_deref().unwrap_or_default(),
                )?;
                edit::decorator(&src, edits, &functions, &ctx)?
            }
            strategy => {
                let (block, label) = edit::block_of(
                    &mut py,
                    &abs,
                    &analysis,
                    input.function.as_deref(),
                    input.lines,
                )?;
                // Wrapping our own lines (the helper import) would move them under the
                // `with`, where a measurement above them runs before the import.
                if let Some(ours) = (block.start..=block.end).find(|&n| {
                    n >= 1
                        && n <= src.lines()
                        && is_helper_import(&String::from_utf8_lossy(src.line(n)))
                }) {
                    return Err(refused(
                        "lines",
                        format!(
                            "{label} include line {ours}, the helper import that system-profile added \
                             (`import _sp_profile  # [PROFILE]`): wrapped, it would run after the \
                             measurement that needs it; give a range below it"
                        ),
                    ));
                }
                if strategy == Strategy::Context {
                    edit::context(&src, edits, &block, &label, &ctx)?
                } else {
                    edit::inline(&src, edits, &block, &label, &ctx)?
                }
            }
        };
        place = fe.place.clone();
        let before = plans
            .iter()
            .rev()
            .find(|p| p.change.file == rel)
            .map(|p| p.after.clone())
            .unwrap_or_else(|| original.clone());
        plans.push(planned(
            &id,
            &rel,
            ChangeRole::Measure,
            (fe.description, fe.description_ja),
            Some(input),
            fe.lines,
            Some(before),
            fe.new.into_bytes(),
            Some(mode),
            requires,
        ));
    } else {
        let functions =
            edit::resolve_functions(&analysis, input.function.as_deref().unwrap_or_default())?;
        let runner_rel = format!("{INSTRUMENT_DIR}/run_{id}.py");
        let text = edit::runner(&abs.to_string_lossy(), &functions, &ctx, &runner_rel);
        place = functions
            .iter()
            .map(|f| format!("{} (lines {}-{})", f.qualname, f.first_line, f.end_line))
            .collect::<Vec<_>>()
            .join(", ");
        let wrapped = functions
            .iter()
            .map(|f| f.qualname.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let desc = (
            format!(
                "runner that runs {rel} with {wrapped} wrapped ({}, {}); {rel} untouched",
                edit::measure_name(input.measure),
                sampling.phrase()
            ),
            format!(
                "{rel} の {wrapped} を包んで実行するランナー（{}、{}）。{rel} 自体は変更しない",
                edit::measure_name(input.measure),
                sampling.phrase_ja()
            ),
        );
        if store.fs.exists(Path::new(&runner_rel)) {
            return Err(refused(
                "path",
                format!("{runner_rel} exists already; nothing was changed"),
            ));
        }
        plans.push(planned(
            &id,
            &runner_rel,
            ChangeRole::Measure,
            desc,
            Some(input),
            Vec::new(),
            None,
            text.into_bytes(),
            Some(0o644),
            requires,
        ));
    }
    // Nothing is kept that does not compile.
    for p in &plans {
        py.compile(&config.root.join(&p.change.file), &p.after).map_err(|e| match e {
            PythonError::Refused(m) => refused(
                "strategy",
                format!("the instrumented {} would not compile ({m}); nothing was changed. Try another strategy or place", p.change.file),
            ),
            e => e.into(),
        })?;
    }
    let changes: Vec<ChangeMade> = plans.iter().map(Planned::made).collect();
    let change_ids: Vec<String> = plans.iter().map(|p| p.change.id.clone()).collect();
    if !input.dry_run {
        for p in plans {
            commit(&mut store, p)?;
        }
    }
    let (run_command, run_note) = match input.strategy {
        Strategy::Runner => (
            vec![python_name.clone(), format!("{INSTRUMENT_DIR}/run_{id}.py")],
            format!(
                "run from {}; arguments after the runner go to {rel}; `--sp-entry other.py` or `--sp-module pkg.main` first runs another entry point that imports {rel}",
                config.root.display()
            ),
        ),
        _ if analysis.main_guard => (
            vec![python_name.clone(), rel.clone()],
            format!("{rel} has a __main__ guard; or run the program that imports it as usual"),
        ),
        _ => (
            Vec::new(),
            format!("{rel} is imported, not run: run the program that imports it as usual; the marks record when it runs"),
        ),
    };
    Ok(InstrumentResult {
        dry_run: input.dry_run,
        change_ids,
        changes,
        place,
        run_command,
        run_note,
        log: LOG_FILE.into(),
        python: python_name,
    })
}

fn lines_text(lines: &[LineRange]) -> String {
    if lines.is_empty() {
        return "—".into();
    }
    lines
        .iter()
        .map(|r| {
            if r.start == r.end {
                r.start.to_string()
            } else {
                format!("{}-{}", r.start, r.end)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Part B's table as Markdown.
pub fn part_b_markdown(rows: &[ChangeRow]) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut md = String::from(
        "| File | Change type | What was added or changed | Lines |\n|---|---|---|---|\n",
    );
    for r in rows {
        let kind = match r.change_type {
            ChangeType::Created => "created",
            ChangeType::Modified => "modified",
        };
        let state = match r.state {
            ChangeState::Reverted => " (reverted)",
            _ => "",
        };
        md.push_str(&format!(
            "| `{}` | {kind}{state} | {} ({}) | {} |\n",
            cell(&r.file),
            cell(&r.what),
            r.id,
            r.lines
        ));
    }
    md
}

/// `list_changes`.
pub fn list_changes(root: &Path, input: &ListChangesInput) -> Result<ChangeList, InstrumentError> {
    let store = LedgerStore::open(root)?;
    let mut rows = Vec::new();
    let mut drifted = Vec::new();
    // The newest active change of a file says what its bytes should be.
    let mut newest: std::collections::BTreeMap<&str, &Change> = Default::default();
    for c in &store.ledger.changes {
        if c.state == ChangeState::Active {
            newest.insert(c.file.as_str(), c);
        }
    }
    for (file, c) in &newest {
        if store.current_hash(file)?.as_deref() != Some(c.sha256_after.as_str()) {
            drifted.push(file.to_string());
        }
    }
    let mut active = 0;
    for c in &store.ledger.changes {
        if c.state == ChangeState::Active {
            active += 1;
        } else if !input.include_reverted {
            continue;
        }
        rows.push(ChangeRow {
            id: c.id.clone(),
            file: c.file.clone(),
            change_type: c.change_type,
            what: c.description.clone(),
            what_ja: c.description_ja.clone(),
            lines: match c.change_type {
                ChangeType::Created => "—".into(),
                ChangeType::Modified => lines_text(&c.lines),
            },
            state: c.state,
            created_at: c.created_at.clone(),
        });
    }
    Ok(ChangeList {
        markdown: part_b_markdown(&rows),
        changes: rows,
        active,
        drifted,
        ledger: LEDGER_FILE.into(),
    })
}

/// `revert_changes`.
pub fn revert_changes(
    config: &InstrumentConfig,
    input: &RevertChangesInput,
) -> Result<RevertResult, InstrumentError> {
    revert::revert(config, input)
}
