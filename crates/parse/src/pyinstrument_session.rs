//! pyinstrument's session file (`-r pyisession`): every sample as its stack of frame
//! identifiers (`function\0file\0line` then `\x01`-led attributes: `l<line executing>`,
//! `c<class of self>`) and the seconds it stands for. Read flat, so a deep stack is no deeper
//! in JSON than a shallow one (the `json` renderer's nested tree is); turned into folded
//! stacks weighted in microseconds and summarised by `folded`.

use crate::Format;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use system_profile_model::metrics::StackProfile;
use system_profile_model::{Diag, Parsed};

pub struct PyinstrumentSession;

impl Format for PyinstrumentSession {
    const NAME: &'static str = "pyinstrument_session";
    type Output = StackProfile;
    fn parse(input: &str) -> Parsed<StackProfile> {
        parse(input)
    }
}

/// One folded sample is this many seconds.
pub const SECONDS_PER_WEIGHT: f64 = 1e-6;

#[derive(Deserialize)]
struct Session {
    #[serde(default)]
    frame_records: Vec<(Vec<String>, f64)>,
}

/// One frame identifier split: function, file, the function's first line, the line executing
/// (`\x01l` attribute) and the class of `self` (`\x01c`).
struct Frame<'a> {
    function: &'a str,
    file: &'a str,
    def_line: &'a str,
    line: &'a str,
    class: Option<&'a str>,
}

fn split(identifier: &str) -> Option<Frame<'_>> {
    let mut parts = identifier.split('\u{1}');
    let mut fields = parts.next()?.split('\0');
    let function = fields.next().filter(|f| !f.is_empty())?;
    let file = fields.next().unwrap_or("");
    let def_line = fields.next().unwrap_or("0");
    let (mut line, mut class) = (def_line, None);
    for a in parts {
        if let Some(l) = a.strip_prefix('l') {
            line = l;
        } else if let Some(c) = a.strip_prefix('c') {
            class = Some(c);
        }
    }
    Some(Frame {
        function,
        file,
        def_line,
        line,
        class,
    })
}

/// A frame as `folded` names it: `function (file:line)`, the line being the one executing (as
/// py-spy gives it). The class pyinstrument records is the instance's (`HandlerTask` for
/// `Task.runTask`), so it names only functions that one file defines more than once (the
/// `fn` each subclass overrides), where it tells them apart.
fn frame_name(f: &Frame, overridden: &HashSet<(&str, &str)>) -> String {
    let function = match f.class {
        Some(c) if overridden.contains(&(f.function, f.file)) => format!("{c}.{}", f.function),
        _ => f.function.to_string(),
    };
    // `;` separates frames in folded stacks.
    format!("{function} ({}:{})", f.file, f.line).replace(';', ":")
}

/// The frames pyinstrument's own command line puts above the program: the thread marker, its
/// `__main__`, and `runpy`'s frames that start the script or module.
fn is_wrapper(file: &str) -> bool {
    file == "<thread>"
        || file == "<frozen runpy>"
        || file == "<string>"
        || file.contains("/pyinstrument/")
}

pub fn parse(input: &str) -> Parsed<StackProfile> {
    let Parsed {
        value: folded,
        mut diagnostics,
    } = to_folded(input);
    let mut parsed = crate::folded::parse(&folded);
    parsed.value.sample_period_s = Some(SECONDS_PER_WEIGHT);
    diagnostics.append(&mut parsed.diagnostics);
    Parsed {
        value: parsed.value,
        diagnostics,
    }
}

/// The session as folded stacks, one line per distinct stack, weighted in microseconds
/// (`SECONDS_PER_WEIGHT`): what a flame graph is drawn from.
pub fn to_folded(input: &str) -> Parsed<String> {
    let mut diagnostics = Vec::new();
    let session: Session = match serde_json::from_str(input) {
        Ok(s) => s,
        Err(e) => {
            diagnostics.push(Diag::general(format!(
                "not a pyinstrument session (pyisession JSON): {e}"
            )));
            return Parsed {
                value: String::new(),
                diagnostics,
            };
        }
    };
    let mut unnamed = 0usize;
    let stacks: Vec<(Vec<Frame>, f64)> = session
        .frame_records
        .iter()
        .map(|(stack, seconds)| {
            let frames = stack
                .iter()
                .filter_map(|id| {
                    let f = split(id);
                    unnamed += usize::from(f.is_none());
                    f
                })
                .collect();
            (frames, *seconds)
        })
        .collect();
    let mut def_lines: HashMap<(&str, &str), HashSet<&str>> = HashMap::new();
    for f in stacks.iter().flat_map(|(frames, _)| frames) {
        def_lines
            .entry((f.function, f.file))
            .or_default()
            .insert(f.def_line);
    }
    let overridden: HashSet<(&str, &str)> = def_lines
        .into_iter()
        .filter(|(_, lines)| lines.len() > 1)
        .map(|(k, _)| k)
        .collect();
    let mut weights: HashMap<String, u64> = HashMap::new();
    for (frames, seconds) in &stacks {
        let names: Vec<String> = frames
            .iter()
            .skip_while(|f| is_wrapper(f.file))
            .map(|f| frame_name(f, &overridden))
            .collect();
        let weight = (seconds.max(0.0) / SECONDS_PER_WEIGHT).round() as u64;
        if names.is_empty() || weight == 0 {
            continue;
        }
        *weights.entry(names.join(";")).or_default() += weight;
    }
    if unnamed > 0 {
        diagnostics.push(Diag::general(format!(
            "{unnamed} frame identifiers had no name and were left out"
        )));
    }
    let mut lines: Vec<String> = weights
        .into_iter()
        .map(|(stack, w)| format!("{stack} {w}"))
        .collect();
    lines.sort();
    Parsed {
        value: lines.join("\n"),
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapper_frames_go_and_time_becomes_microseconds() {
        let input = r#"{"frame_records": [
            [["MainThread\u0000<thread>\u0000140", "_run_code\u0000<frozen runpy>\u000065\u0001l88",
              "<module>\u0000app.py\u00001\u0001l9", "work\u0000app.py\u00003\u0001cApp\u0001l5"], 0.003],
            [["MainThread\u0000<thread>\u0000140", "<module>\u0000app.py\u00001\u0001l9"], 0.001],
            [["<module>\u0000app.py\u00001\u0001l9", "fn\u0000app.py\u000020\u0001cA\u0001l21"], 0.001],
            [["<module>\u0000app.py\u00001\u0001l9", "fn\u0000app.py\u000030\u0001cB\u0001l31"], 0.001]
        ]}"#;
        let p = parse(input);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let s = p.value;
        assert_eq!(s.total_samples, 6000);
        assert_eq!(s.by_self[0].function, "work");
        assert_eq!(s.by_self[0].file.as_deref(), Some("app.py"));
        assert_eq!(s.by_self[0].self_samples, 3000);
        assert!((s.by_self[0].self_percent - 50.0).abs() < 1e-9);
        // One name, two definitions: the class tells them apart; one definition keeps its
        // bare name whatever the instance.
        let names: Vec<&str> = s.by_self.iter().map(|f| f.function.as_str()).collect();
        assert!(
            names.contains(&"A.fn") && names.contains(&"B.fn"),
            "{names:?}"
        );
        assert_eq!(s.sample_period_s, Some(1e-6));
        assert_eq!(s.lines[0].line, 5);
    }

    #[test]
    fn not_a_session_is_a_diagnostic() {
        let p = parse("{\"frame_records\": 3");
        assert_eq!(p.value.total_samples, 0);
        assert_eq!(p.diagnostics.len(), 1);
    }
}
