//! Which call of the program's own code led to library work: for a stack whose top frame is
//! a library's, the deepest frame of the program's own code beneath it. A hotspot in
//! `json/decoder.py` or torch's autograd is not something the user can edit; the line of
//! theirs that calls it is.

use std::collections::HashMap;
use system_profile_model::metrics::{
    library_file, native_file, CallSite, CallVia, NativeCallSite, NativeFunction,
};

/// At most this many call sites are kept, most samples first.
const CALL_SITES_KEPT: usize = 50;
/// Native calls kept, and native functions named under each.
const NATIVE_CALLS_KEPT: usize = 20;
const NATIVE_FUNCTIONS_KEPT: usize = 4;

/// A frame as `split_frame` reads it: function, file, line.
pub(super) type Frame<'a> = (&'a str, Option<&'a str>, Option<u32>);

/// Frames of Python's start-up that run the main module (`python -m x`, `runpy`).
fn bootstrap(frame: &Frame) -> bool {
    matches!(frame.1, Some(f) if f == "<frozen runpy>" || f.ends_with("/runpy.py"))
}

fn import_machinery(frame: &Frame) -> bool {
    matches!(frame.1, Some(f) if f.starts_with("<frozen importlib")) || frame.0 == "_find_and_load"
}

/// A call site's identity: the program's function, file and line, the library function on
/// top and its file, and whether an import led there.
type SiteKey = (String, String, Option<u32>, String, Option<String>, bool);

/// Call sites summed over stacks.
#[derive(Default)]
pub(super) struct CallSites {
    by_site: HashMap<SiteKey, u64>,
}

impl CallSites {
    /// One stack (root first) and its samples. The main module counts as the program's own
    /// code wherever it lives: `python -m json.tool` runs json/tool.py as the program.
    pub(super) fn add(&mut self, frames: &[Frame], count: u64) {
        let Some(top) = frames.last() else {
            return;
        };
        // Under `--native` the interpreter's own C frames (`_start`, `Py_RunMain`) root the
        // stack: the main module is the first Python frame past them.
        let main_file = frames
            .iter()
            .find(|f| !bootstrap(f) && f.1.is_some_and(|file| !native_file(file)))
            .filter(|f| f.0 == "<module>")
            .and_then(|f| f.1)
            .filter(|f| !f.starts_with('<'));
        let program = |f: &Frame| !library_file(f.1) || (f.1.is_some() && f.1 == main_file);
        if program(top) {
            return;
        }
        let Some(at) = frames.iter().rposition(program) else {
            return;
        };
        let (function, file, line) = frames[at];
        let importing = frames[at + 1..].iter().any(import_machinery);
        *self
            .by_site
            .entry((
                function.to_string(),
                file.unwrap_or_default().to_string(),
                line,
                top.0.to_string(),
                top.1.map(str::to_string),
                importing,
            ))
            .or_default() += count;
    }

    /// The call sites, most samples first, as shares of `total_samples`; and the calls that
    /// ran native code, each summed over the native functions on top.
    pub(super) fn finish(self, total_samples: u64) -> (Vec<CallSite>, Vec<NativeCallSite>) {
        let percent = |samples: u64| samples as f64 * 100.0 / total_samples.max(1) as f64;
        let mut native: Vec<NativeCallSite> = Vec::new();
        for ((function, file, line, library_function, library_file, importing), &samples) in
            &self.by_site
        {
            let Some(library) = library_file
                .as_deref()
                .filter(|f| !importing && native_file(f))
            else {
                continue;
            };
            let at = match native
                .iter()
                .position(|n| (&n.function, &n.file, n.line) == (function, file, *line))
            {
                Some(at) => at,
                None => {
                    native.push(NativeCallSite {
                        function: function.clone(),
                        file: file.clone(),
                        line: *line,
                        samples: 0,
                        percent: 0.0,
                        functions: Vec::new(),
                    });
                    native.len() - 1
                }
            };
            native[at].samples += samples;
            native[at].functions.push(NativeFunction {
                function: library_function.clone(),
                library: library.rsplit('/').next().unwrap_or(library).to_string(),
                percent: percent(samples),
            });
        }
        for n in &mut native {
            n.percent = percent(n.samples);
            n.functions.sort_by(|a, b| {
                b.percent
                    .total_cmp(&a.percent)
                    .then_with(|| (&a.function, &a.library).cmp(&(&b.function, &b.library)))
            });
            n.functions.truncate(NATIVE_FUNCTIONS_KEPT);
        }
        native.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| (&a.file, a.line, &a.function).cmp(&(&b.file, b.line, &b.function)))
        });
        native.truncate(NATIVE_CALLS_KEPT);
        (self.call_sites(total_samples), native)
    }

    fn call_sites(self, total_samples: u64) -> Vec<CallSite> {
        let mut out: Vec<CallSite> = self
            .by_site
            .into_iter()
            .map(
                |((function, file, line, library_function, library_file, importing), samples)| {
                    CallSite {
                        function,
                        file,
                        line,
                        library_function,
                        library_file,
                        via: if importing {
                            CallVia::Import
                        } else {
                            CallVia::Call
                        },
                        samples,
                        percent: if total_samples > 0 {
                            samples as f64 * 100.0 / total_samples as f64
                        } else {
                            0.0
                        },
                    }
                },
            )
            .collect();
        // Ties broken by place, so the same input always gives the same order.
        out.sort_by(|a, b| {
            b.samples.cmp(&a.samples).then_with(|| {
                (&a.file, a.line, &a.function, &a.library_function).cmp(&(
                    &b.file,
                    b.line,
                    &b.function,
                    &b.library_function,
                ))
            })
        });
        out.truncate(CALL_SITES_KEPT);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(frames: &[Frame], count: u64) -> Vec<CallSite> {
        let mut s = CallSites::default();
        s.add(frames, count);
        s.finish(count).0
    }

    #[test]
    fn a_library_top_is_charged_to_the_deepest_frame_of_the_program() {
        let lib = Some("/v/lib/python3.11/site-packages/torch/autograd/graph.py");
        let sites = site(
            &[
                ("<module>", Some("train.py"), Some(90)),
                ("train", Some("train.py"), Some(61)),
                (
                    "backward",
                    Some("/v/lib/python3.11/site-packages/torch/_tensor.py"),
                    Some(5),
                ),
                ("_engine_run_backward", lib, Some(8)),
            ],
            7,
        );
        assert_eq!(sites.len(), 1);
        let s = &sites[0];
        assert_eq!(
            (s.function.as_str(), s.file.as_str(), s.line),
            ("train", "train.py", Some(61))
        );
        assert_eq!(
            (s.library_function.as_str(), s.library_file.as_deref()),
            ("_engine_run_backward", lib)
        );
        assert_eq!((s.via, s.samples), (CallVia::Call, 7));
        // The program's own code on top is not a call into a library.
        assert!(site(&[("f", Some("a.py"), Some(1))], 1).is_empty());
        // No frame of the program at all (a thread of a library): nothing to charge.
        assert!(site(
            &[("run", Some("/usr/lib/python3.11/threading.py"), Some(1))],
            1
        )
        .is_empty());
    }

    #[test]
    fn the_main_module_is_the_program_and_imports_are_told_apart() {
        let json = "/usr/lib/python3.11/json";
        let tool = format!("{json}/tool.py");
        let decoder = format!("{json}/decoder.py");
        let sites = site(
            &[
                ("_run_module_as_main", Some("<frozen runpy>"), Some(198)),
                ("_run_code", Some("<frozen runpy>"), Some(88)),
                ("<module>", Some(&tool), Some(89)),
                ("main", Some(&tool), Some(66)),
                ("raw_decode", Some(&decoder), Some(353)),
            ],
            3,
        );
        assert_eq!(
            (sites[0].function.as_str(), sites[0].line),
            ("main", Some(66))
        );
        let sites = site(
            &[
                ("<module>", Some("boring.py"), Some(3)),
                (
                    "_find_and_load",
                    Some("<frozen importlib._bootstrap>"),
                    Some(1176),
                ),
                (
                    "<module>",
                    Some("/v/lib/python3.11/site-packages/torch/__init__.py"),
                    Some(9),
                ),
            ],
            2,
        );
        assert_eq!(sites[0].via, CallVia::Import);
    }
}
