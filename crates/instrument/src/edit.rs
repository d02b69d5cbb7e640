//! The strategies: what lines go where, computed from the file's syntax tree (`python.rs`)
//! over its bytes (`source.rs`). Every line we add ends in `# [PROFILE] <change id>`, so a
//! reader (and `grep`) finds each one and knows which ledger entry it belongs to.

use crate::python::{Analysis, Block, Function, Python, PythonError};
use crate::source::{Edits, Source};
use crate::{refused, InstrumentError};
use std::path::Path;
use system_profile_model::instrument::{LineRange, Measure};

/// How often a site measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub every: u32,
    pub rate: Option<f64>,
}

impl Sampling {
    fn args(&self) -> String {
        let mut s = format!("{}", self.every);
        if let Some(r) = self.rate {
            s.push_str(&format!(", {r:?}"));
        }
        s
    }

    pub fn phrase(&self) -> String {
        match (self.every, self.rate) {
            (1, None) => "every call".into(),
            (n, None) => format!("1 call in {n}"),
            (1, Some(r)) => format!("{}% of calls at random", r * 100.0),
            (n, Some(r)) => format!("1 call in {n}, then {}% of those at random", r * 100.0),
        }
    }

    pub fn phrase_ja(&self) -> String {
        match (self.every, self.rate) {
            (1, None) => "毎回の呼び出し".into(),
            (n, None) => format!("{n} 回に 1 回"),
            (1, Some(r)) => format!("無作為に {}% の呼び出し", r * 100.0),
            (n, Some(r)) => format!("{n} 回に 1 回、そのうち無作為に {}%", r * 100.0),
        }
    }
}

/// A Python string literal for `s`, ASCII only, so it is the same in any source encoding.
pub fn py_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(ch),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

pub fn measure_name(m: Measure) -> &'static str {
    match m {
        Measure::Timing => "timing",
        Measure::CudaEvents => "cuda_events",
        Measure::Transfers => "transfers",
        Measure::Memory => "memory",
        Measure::Duplicates => "duplicates",
        Measure::Nccl => "nccl",
        Measure::Custom => "custom",
    }
}

pub fn marker(id: &str) -> String {
    format!("# [PROFILE] {id}")
}

/// The one line that makes the helper importable, placed after the module docstring and
/// `__future__` imports.
fn import_line(id: &str, helper_dir: &str) -> String {
    format!(
        "__import__(\"sys\").path.append({}); import _sp_profile  {}",
        py_str(helper_dir),
        marker(id)
    )
}

/// A planned edit of one existing file.
#[derive(Debug)]
pub struct FileEdit {
    pub new: Source,
    pub description: String,
    pub description_ja: String,
    /// Lines of the result that are ours (added or re-indented).
    pub lines: Vec<LineRange>,
    /// Where the measurement is, in words.
    pub place: String,
}

/// What every strategy needs to know.
pub struct EditContext<'a> {
    pub id: &'a str,
    pub measure: Measure,
    pub sampling: Sampling,
    /// The file as the user names it (relative to the root): in labels.
    pub rel: &'a str,
    pub snippet: Option<&'a str>,
}

/// Find each comma-separated qualified name in the file.
pub fn resolve_functions<'a>(
    analysis: &'a Analysis,
    names: &str,
) -> Result<Vec<&'a Function>, InstrumentError> {
    let mut found = Vec::new();
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let hit = analysis
            .functions
            .iter()
            .find(|f| f.qualname == name)
            .or_else(|| {
                // `step` alone is enough when only one function has that name.
                let mut tail = analysis
                    .functions
                    .iter()
                    .filter(|f| f.qualname.rsplit('.').next() == Some(name));
                match (tail.next(), tail.next()) {
                    (Some(f), None) => Some(f),
                    _ => None,
                }
            });
        match hit {
            Some(f) => found.push(f),
            None => {
                let mut names: Vec<&str> = analysis
                    .functions
                    .iter()
                    .map(|f| f.qualname.as_str())
                    .collect();
                names.truncate(30);
                return Err(refused(
                    "function",
                    format!(
                        "no function `{name}` in the file; it defines: {}",
                        if names.is_empty() {
                            "no functions".into()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    if found.is_empty() {
        return Err(refused("function", "no function named"));
    }
    Ok(found)
}

/// The helper import line of change `import_id`, placed after the docstring and `__future__`
/// imports, as the first edit of a fresh set; or no edits when the file has its import.
pub fn seed(
    analysis: &Analysis,
    src: &Source,
    import_id: Option<&str>,
    helper_dir: &str,
) -> Result<Edits, InstrumentError> {
    let mut edits = Edits::default();
    if let Some(id) = import_id {
        place_import(&mut edits, analysis, src, id, helper_dir)?;
    }
    Ok(edits)
}

fn place_import(
    edits: &mut Edits,
    analysis: &Analysis,
    src: &Source,
    id: &str,
    helper_dir: &str,
) -> Result<(), InstrumentError> {
    let line = import_line(id, helper_dir);
    match analysis.import_line {
        Some(-1) => Err(refused(
            "path",
            format!(
                "line {} holds the module docstring or a __future__ import and another statement: the helper import has nowhere to go; split that line",
                analysis.import_after
            ),
        )),
        Some(n) if n >= 1 => {
            edits.insert(n as usize, vec![line]);
            Ok(())
        }
        _ => {
            edits.insert(src.lines() + 1, vec![line]);
            Ok(())
        }
    }
}

fn call_args(ctx: &EditContext, name: &str) -> String {
    format!(
        "{}, {}, {}, {}",
        py_str(ctx.id),
        py_str(name),
        py_str(measure_name(ctx.measure)),
        ctx.sampling.args()
    )
}

fn ranges(rs: &[(usize, usize)]) -> Vec<LineRange> {
    let mut v: Vec<LineRange> = rs
        .iter()
        .filter(|(s, e)| *s >= 1 && e >= s)
        .map(|&(s, e)| LineRange {
            start: s as u32,
            end: e as u32,
        })
        .collect();
    v.sort_by_key(|r| r.start);
    let mut merged: Vec<LineRange> = Vec::new();
    for r in v {
        match merged.last_mut() {
            Some(last) if r.start <= last.end + 1 => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// `decorator`: the import, and one marked decorator line right above each `def` (below any
/// other decorators, so it wraps the function itself).
pub fn decorator(
    src: &Source,
    mut edits: Edits,
    functions: &[&Function],
    ctx: &EditContext,
) -> Result<FileEdit, InstrumentError> {
    let skip = edits.len();
    let mut names = Vec::new();
    for f in functions {
        if f.is_async && f.is_generator {
            return Err(refused(
                "function",
                format!("{} is an async generator, which a wrapper cannot time; use strategy context on lines of its body", f.qualname),
            ));
        }
        let indent = src.indentation(f.def_line);
        edits.insert(
            f.def_line,
            vec![format!(
                "{indent}@_sp_profile.profile({})  {}",
                call_args(ctx, &f.qualname),
                marker(ctx.id)
            )],
        );
        names.push(format!(
            "{} (lines {}-{})",
            f.qualname, f.first_line, f.end_line
        ));
    }
    let (new, rs) = src.apply(&edits);
    let qualnames = names
        .iter()
        .map(|n| n.split(' ').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(FileEdit {
        new,
        description: format!(
            "{} decorator on {} ({})",
            measure_name(ctx.measure),
            qualnames,
            ctx.sampling.phrase()
        ),
        description_ja: format!(
            "{} に {} デコレータ（{}）",
            qualnames,
            measure_name(ctx.measure),
            ctx.sampling.phrase_ja()
        ),
        lines: ranges(&rs[skip..]),
        place: names.join(", "),
    })
}

/// The statements to wrap: a line range snapped to whole statements, or a function's body
/// after its docstring.
pub fn block_of(
    py: &mut Python,
    path: &Path,
    analysis: &Analysis,
    function: Option<&str>,
    lines: Option<LineRange>,
) -> Result<(Block, String), InstrumentError> {
    if let Some(r) = lines {
        if r.start == 0 || r.end < r.start {
            return Err(refused(
                "lines",
                format!(
                    "{}-{} is not a range of lines (1-based, start <= end)",
                    r.start, r.end
                ),
            ));
        }
        let b = py
            .block(path, r.start as usize, r.end as usize)
            .map_err(|e| match e {
                PythonError::Refused(m) => refused("lines", m),
                e => e.into(),
            })?;
        let label = format!("lines {}-{} of {}", b.start, b.end, b.scope);
        return Ok((b, label));
    }
    let name = function.unwrap_or_default();
    let f = resolve_functions(analysis, name)?;
    if f.len() != 1 {
        return Err(refused("function", "context and inline take one function"));
    }
    let f = f[0];
    let (Some(start), Some(end)) = (f.code_start, f.code_end) else {
        return Err(refused(
            "function",
            format!("{} has only a docstring: nothing to measure", f.qualname),
        ));
    };
    if f.one_line {
        return Err(refused(
            "function",
            format!(
                "{}'s body shares the def line; use strategy decorator",
                f.qualname
            ),
        ));
    }
    let b = py.block(path, start, end).map_err(|e| match e {
        PythonError::Refused(m) => refused("function", m),
        e => e.into(),
    })?;
    let label = format!("{} body (lines {}-{})", f.qualname, b.start, b.end);
    Ok((b, label))
}

/// `context`: a marked `with` line above the block and the block indented one level, except
/// blank lines and lines that begin inside a string literal (indenting those would change
/// the string).
pub fn context(
    src: &Source,
    mut edits: Edits,
    block: &Block,
    label: &str,
    ctx: &EditContext,
) -> Result<FileEdit, InstrumentError> {
    let skip = edits.len();
    let indent = src.indentation(block.start);
    let unit = src.indent_unit(block.start);
    edits.insert(
        block.start,
        vec![format!(
            "{indent}with _sp_profile.block({}):  {}",
            call_args(ctx, &format!("{}:{}", ctx.rel, label)),
            marker(ctx.id)
        )],
    );
    for line in block.start..=block.end {
        if !block.string_lines.contains(&line) {
            edits.indent(line, unit);
        }
    }
    let (new, mut rs) = src.apply(&edits);
    // The re-indented lines are ours too: they follow the `with` line.
    if let Some(&(w, _)) = rs.get(skip) {
        rs.push((w + 1, w + 1 + block.end - block.start));
    }
    Ok(FileEdit {
        new,
        description: format!(
            "`with` {} block around {label} (re-indented; {})",
            measure_name(ctx.measure),
            ctx.sampling.phrase()
        ),
        description_ja: format!(
            "{label} を囲む {} の `with` ブロック（字下げし直し、{}）",
            measure_name(ctx.measure),
            ctx.sampling.phrase_ja()
        ),
        lines: ranges(&rs[skip..]),
        place: label.to_string(),
    })
}

/// `inline`: a marked start line before the block and a marked stop line after it; for
/// `custom`, the snippet before the block between marker comments.
pub fn inline(
    src: &Source,
    mut edits: Edits,
    block: &Block,
    label: &str,
    ctx: &EditContext,
) -> Result<FileEdit, InstrumentError> {
    let indent = src.indentation(block.start);
    let skip = edits.len();
    if ctx.measure == Measure::Custom {
        let snippet = ctx.snippet.unwrap_or_default();
        let body = dedent(snippet);
        let mut lines = vec![format!("{indent}{} begin", marker(ctx.id))];
        lines.extend(body.iter().map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                format!("{indent}{l}")
            }
        }));
        lines.push(format!("{indent}{} end", marker(ctx.id)));
        edits.insert(block.start, lines);
        let (new, rs) = src.apply(&edits);
        return Ok(FileEdit {
            new,
            description: format!("custom snippet ({} lines) before {label}", body.len()),
            description_ja: format!("{label} の前にカスタムコード（{} 行）", body.len()),
            lines: ranges(&rs[skip..]),
            place: label.to_string(),
        });
    }
    if !block.escapes.is_empty() {
        return Err(refused(
            "strategy",
            format!(
                "{label} can leave early through `{}`: an end mark after it would not run; use strategy context (or decorator for a whole function)",
                block.escapes.join("`, `")
            ),
        ));
    }
    let var = format!("_sp_{}", ctx.id);
    edits.insert(
        block.start,
        vec![format!(
            "{indent}{var} = _sp_profile.start({})  {}",
            call_args(ctx, &format!("{}:{}", ctx.rel, label)),
            marker(ctx.id)
        )],
    );
    edits.insert(
        block.end + 1,
        vec![format!(
            "{indent}_sp_profile.stop({var})  {}",
            marker(ctx.id)
        )],
    );
    let (new, rs) = src.apply(&edits);
    Ok(FileEdit {
        new,
        description: format!(
            "inline {} start/stop marks around {label} ({})",
            measure_name(ctx.measure),
            ctx.sampling.phrase()
        ),
        description_ja: format!(
            "{label} の前後に {} の開始・終了マーク（{}）",
            measure_name(ctx.measure),
            ctx.sampling.phrase_ja()
        ),
        lines: ranges(&rs[skip..]),
        place: label.to_string(),
    })
}

/// The snippet's lines with their common indentation removed.
fn dedent(snippet: &str) -> Vec<String> {
    let lines: Vec<&str> = snippet.lines().collect();
    let common = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                l[common.min(l.len())..].trim_end().to_string()
            }
        })
        .collect()
}

/// The runner file: imports the helper next to it and runs the target with the functions
/// wrapped at import time.
pub fn runner(
    target_abs: &str,
    functions: &[&Function],
    ctx: &EditContext,
    rel_runner: &str,
) -> String {
    let names: Vec<String> = functions.iter().map(|f| py_str(&f.qualname)).collect();
    let rate = ctx.sampling.rate.unwrap_or(1.0);
    format!(
        "#!/usr/bin/env python3\n\
         {marker}: created by system-profile's instrument_file; revert_changes removes it.\n\
         # Runs {target} with {funcs} wrapped ({measure}, {phrase}); the file itself is not touched.\n\
         #   python {rel_runner} [ARGS...]                    the target as __main__\n\
         #   python {rel_runner} --sp-entry PATH [ARGS...]    another script that imports it\n\
         #   python {rel_runner} --sp-module NAME [ARGS...]   a module run as with -m\n\
         import sys\n\
         import _sp_profile\n\
         \n\
         _sp_profile.run({{\"change\": {id}, \"target\": {target_lit}, \"functions\": [{list}],\n\
         \x20                 \"measure\": {m}, \"every\": {every}, \"rate\": {rate:?}}}, sys.argv)\n",
        marker = marker(ctx.id),
        target = ctx.rel,
        funcs = functions.iter().map(|f| f.qualname.as_str()).collect::<Vec<_>>().join(", "),
        measure = measure_name(ctx.measure),
        phrase = ctx.sampling.phrase(),
        id = py_str(ctx.id),
        target_lit = py_str(target_abs),
        list = names.join(", "),
        m = py_str(measure_name(ctx.measure)),
        every = ctx.sampling.every,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_literals_are_ascii_and_escaped() {
        assert_eq!(py_str("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(py_str("é€𝄞"), "\"\\xe9\\u20ac\\U0001d11e\"");
    }

    #[test]
    fn snippets_are_dedented() {
        assert_eq!(
            dedent("    a = 1\n      b = 2\n\n"),
            vec!["a = 1", "  b = 2", ""]
        );
    }
}
