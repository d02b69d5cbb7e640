//! Folded stacks, one per line: `frame;frame;...;leaf COUNT`, root first (py-spy's `raw`
//! format, Brendan Gregg's collapsed format from `perf script`). py-spy writes each frame as
//! `function (file:line)`; perf as a bare symbol. Read line by line, so memory grows with the
//! number of distinct functions, not with the input.

mod call_sites;

use crate::Format;
use call_sites::{CallSites, Frame};
use std::collections::HashMap;
use system_profile_model::metrics::{FunctionHotspot, LineHotspot, StackProfile, ThreadSamples};
use system_profile_model::{Diag, Parsed};

pub struct Folded;

impl Format for Folded {
    const NAME: &'static str = "folded";
    type Output = StackProfile;
    fn parse(input: &str) -> Parsed<StackProfile> {
        parse(input)
    }
}

/// `name (file:line)` → (name, file, line); a bare symbol → (symbol, None, None).
pub fn split_frame(frame: &str) -> (&str, Option<&str>, Option<u32>) {
    let frame = frame.trim();
    if let Some(open) = frame.rfind(" (") {
        if let Some(inner) = frame[open + 2..].strip_suffix(')') {
            let (file, line) = match inner.rsplit_once(':') {
                Some((f, l)) => match l.parse::<u32>() {
                    Ok(n) => (f, Some(n)),
                    Err(_) => (inner, None),
                },
                None => (inner, None),
            };
            return (&frame[..open], Some(file), line);
        }
    }
    (frame, None, None)
}

/// The name an unsymbolized native frame takes where no named frame of its library lies
/// beneath it.
const UNSYMBOLIZED: &str = "[unsymbolized]";

/// `py-spy --native` names a stripped library's static functions by address
/// (`0x7f692bdd8485 (libz.so.1.2.13)`), one row per instruction: zlib's time came out as a
/// dozen rows of 1-15% where it was one library call of 96%. An address takes the name of the
/// nearest named frame of the same library beneath it (`deflate`, which called them), else
/// [`UNSYMBOLIZED`] in that library, so the time sums where the user can see it.
fn name_unsymbolized_frames(frames: &mut [Frame]) {
    let address = |name: &str| {
        name.strip_prefix("0x")
            .is_some_and(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    for i in 0..frames.len() {
        let (name, file, _) = frames[i];
        if !address(name) {
            continue;
        }
        let named = frames[..i]
            .iter()
            .rev()
            .take_while(|f| f.1 == file)
            .find(|f| !address(f.0))
            .map_or(UNSYMBOLIZED, |f| f.0);
        frames[i].0 = named;
    }
}

#[derive(Default)]
struct Acc {
    self_samples: u64,
    total_samples: u64,
    line: Option<u32>,
    line_from_top: bool,
}

pub fn parse(input: &str) -> Parsed<StackProfile> {
    parse_lines(input.lines())
}

/// Read folded stacks from a reader, a line at a time: memory grows with the distinct
/// functions, not with the file (a multi-GB `perf script` collapse reads in constant memory).
pub fn parse_reader(reader: impl std::io::BufRead) -> Parsed<StackProfile> {
    let mut unreadable = 0usize;
    let lines = reader.lines().map_while(|l| match l {
        Ok(l) => Some(l),
        Err(_) => {
            unreadable += 1;
            None
        }
    });
    let mut parsed = parse_lines(lines);
    if unreadable > 0 {
        parsed.diagnostics.push(Diag::general(
            "the input stopped at a line that is not UTF-8 or could not be read",
        ));
    }
    parsed
}

/// The process a stack was sampled in and the stack without py-spy's root frames under
/// `--subprocesses`, `process 5775:"<cmdline>"`: one per process from the one py-spy started
/// down to the one sampled (a shell, then the interpreter, then a pool's worker); the last
/// marker's pid, absent without the switch.
fn sampled_process(mut stack: &str) -> (Option<u32>, &str) {
    let mut pid = None;
    while let Some((marked, rest)) = one_process_marker(stack) {
        pid = Some(marked);
        stack = rest;
    }
    (pid, stack)
}

/// The first marker's pid and what follows it. The command line is quoted and may itself
/// hold `;` (`python -c "a; b"`), so the marker ends at the closing `";`, not at the first `;`.
fn one_process_marker(stack: &str) -> Option<(u32, &str)> {
    let (pid, rest) = stack.strip_prefix("process ")?.split_once(':')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let pid = pid.parse().ok()?;
    let frames = match rest.strip_prefix('"') {
        Some(quoted) => quoted.find("\";").map_or("", |end| &quoted[end + 2..]),
        None => rest.split_once(';').map_or("", |(_, frames)| frames),
    };
    Some((pid, frames))
}

/// A stack without py-spy's thread frame under `--threads`, `thread (27296): Thread-1 (work)`
/// (older py-spy: `thread (0x7F3A...)`), and that thread's name; the stack as it was without one.
fn without_thread_marker(stack: &str) -> (&str, Option<&str>) {
    if !stack.starts_with("thread (") {
        return (stack, None);
    }
    match stack.split_once(';') {
        Some((thread, frames)) => (frames, Some(thread)),
        None => ("", Some(stack)),
    }
}

fn parse_lines<S: AsRef<str>>(input: impl Iterator<Item = S>) -> Parsed<StackProfile> {
    let mut diagnostics = Vec::new();
    let mut functions: HashMap<(String, Option<String>), Acc> = HashMap::new();
    let mut lines: HashMap<(String, String, u32), u64> = HashMap::new();
    let mut total = 0u64;
    let mut stacks = 0u64;
    let mut seen: Vec<(String, Option<String>)> = Vec::new();
    let mut call_sites = CallSites::default();
    let mut threads: HashMap<(Option<u32>, String), u64> = HashMap::new();
    for (i, raw) in input.enumerate() {
        let line = raw.as_ref().trim_end();
        if line.is_empty() {
            continue;
        }
        let Some((stack, count)) = line.rsplit_once(' ') else {
            diagnostics.push(Diag::at(i + 1, "no sample count after the stack"));
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            diagnostics.push(Diag::at(
                i + 1,
                format!("unreadable sample count {count:?}"),
            ));
            continue;
        };
        total += count;
        stacks += 1;
        // `py-spy --subprocesses` roots each stack at its process; that is not a function.
        // A stack of the marker alone still counts in the total (a sample with no Python).
        let (pid, stack) = sampled_process(stack);
        let (stack, thread) = without_thread_marker(stack);
        if let Some(t) = thread {
            *threads.entry((pid, t.to_string())).or_default() += count;
        }
        let frames: Vec<&str> = stack.split(';').filter(|f| !f.is_empty()).collect();
        seen.clear();
        let mut split: Vec<Frame> = frames.iter().map(|f| split_frame(f)).collect();
        name_unsymbolized_frames(&mut split);
        call_sites.add(&split, count);
        for (depth, &(name, file, line_no)) in split.iter().enumerate() {
            let key = (name.to_string(), file.map(str::to_string));
            let top = depth + 1 == frames.len();
            let acc = functions.entry(key.clone()).or_default();
            if top {
                acc.self_samples += count;
                if !acc.line_from_top {
                    acc.line = line_no;
                    acc.line_from_top = true;
                }
                if let (Some(f), Some(l)) = (file, line_no) {
                    *lines
                        .entry((name.to_string(), f.to_string(), l))
                        .or_default() += count;
                }
            } else if acc.line.is_none() {
                acc.line = line_no;
            }
            // Recursion counts a function once per stack.
            if !seen.contains(&key) {
                acc.total_samples += count;
                seen.push(key);
            }
        }
    }
    let pct = |n: u64| {
        if total > 0 {
            n as f64 * 100.0 / total as f64
        } else {
            0.0
        }
    };
    let mut all: Vec<FunctionHotspot> = functions
        .into_iter()
        .map(|((function, file), a)| FunctionHotspot {
            function,
            file,
            line: a.line,
            self_samples: a.self_samples,
            total_samples: a.total_samples,
            self_percent: pct(a.self_samples),
            total_percent: pct(a.total_samples),
        })
        .collect();
    // Ties broken by name, file and line, so the same input always gives the same order.
    let names = |a: &FunctionHotspot, b: &FunctionHotspot| {
        (&a.function, &a.file, a.line).cmp(&(&b.function, &b.file, b.line))
    };
    all.sort_by(|a, b| {
        (b.self_samples, b.total_samples)
            .cmp(&(a.self_samples, a.total_samples))
            .then_with(|| names(a, b))
    });
    let by_self: Vec<FunctionHotspot> = all.iter().take(100).cloned().collect();
    all.sort_by(|a, b| {
        (b.total_samples, b.self_samples)
            .cmp(&(a.total_samples, a.self_samples))
            .then_with(|| names(a, b))
    });
    all.truncate(100);
    let mut line_rows: Vec<LineHotspot> = lines
        .into_iter()
        .map(|((function, file, line), n)| LineHotspot {
            function,
            file,
            line,
            self_samples: n,
            self_percent: pct(n),
        })
        .collect();
    line_rows.sort_by(|a, b| {
        b.self_samples
            .cmp(&a.self_samples)
            .then_with(|| (&a.file, a.line, &a.function).cmp(&(&b.file, b.line, &b.function)))
    });
    line_rows.truncate(50);
    let mut thread_rows: Vec<ThreadSamples> = threads
        .into_iter()
        .map(|((pid, thread), samples)| ThreadSamples {
            pid,
            thread,
            samples,
        })
        .collect();
    thread_rows.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.thread.cmp(&b.thread))
    });
    thread_rows.truncate(50);
    let (call_sites_kept, native_calls) = call_sites.finish(total);
    Parsed {
        value: StackProfile {
            total_samples: total,
            stacks,
            by_self,
            by_total: all,
            lines: line_rows,
            sample_period_s: None,
            call_sites: call_sites_kept,
            native_calls,
            threads: thread_rows,
            gil_holders_only: false,
        },
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn py_spy_thread_frames_are_counted_per_thread_and_are_not_functions() {
        // As py-spy 0.4 writes `record --gil --threads --subprocesses --format raw`.
        let p = parse(concat!(
            "process 7:\"python3 t.py\";thread (27296): Thread-1 (work);Thread.run (threading.py:982);work (t.py:4) 24\n",
            "process 7:\"python3 t.py\";thread (27297): Thread-2 (work);Thread.run (threading.py:982);work (t.py:5) 12\n",
            "process 7:\"python3 t.py\";thread (27296): Thread-1 (work);Thread.run (threading.py:982);work (t.py:5) 43\n",
            "process 7:\"python3 t.py\";process 9:\"python3 -c x\";thread (0x7F3A12345678) 1\n",
        ));
        let v = p.value;
        assert_eq!(v.total_samples, 80);
        assert_eq!(v.by_self[0].function, "work");
        assert_eq!(v.by_self[0].self_samples, 79);
        assert!(v.by_total.iter().all(|f| !f.function.starts_with("thread")));
        // Each thread with the process it ran in (the last marker): a pool's workers each
        // have a GIL of their own.
        let threads: Vec<(Option<u32>, &str, u64)> = v
            .threads
            .iter()
            .map(|t| (t.pid, t.thread.as_str(), t.samples))
            .collect();
        assert_eq!(
            threads,
            vec![
                (Some(7), "thread (27296): Thread-1 (work)", 67),
                (Some(7), "thread (27297): Thread-2 (work)", 12),
                (Some(9), "thread (0x7F3A12345678)", 1),
            ]
        );
        // Without --subprocesses no process is named.
        let alone = parse("thread (5): MainThread;f (a.py:1) 3\n").value;
        assert_eq!(alone.threads[0].pid, None);
        // Without the switch: no threads.
        assert!(parse("f (a.py:1) 3\n").value.threads.is_empty());
    }

    #[test]
    fn py_spy_process_roots_are_not_functions() {
        let p = parse(
            "process 5775:\"python3 app.py\";crunch (app.py:15) 96\nprocess 5775:\"python3 app.py\" 4\n",
        )
        .value;
        assert_eq!(p.total_samples, 100);
        assert_eq!(p.by_self.len(), 1);
        assert_eq!(p.by_self[0].function, "crunch");
        assert!((p.by_self[0].self_percent - 96.0).abs() < 1e-9);
        let spawned =
            "process 9:\"python -c \"from m import s; s(fd=4) --fork\";w (a.py:3);f (a.py:9)";
        assert_eq!(sampled_process(spawned), (Some(9), "w (a.py:3);f (a.py:9)"));
        assert_eq!(
            sampled_process("process 1:x;f (a.py:1)"),
            (Some(1), "f (a.py:1)")
        );
        assert_eq!(
            sampled_process("process_item (a.py:3)"),
            (None, "process_item (a.py:3)")
        );
        assert_eq!(sampled_process("process :x;f"), (None, "process :x;f"));
        // A shell between py-spy and the interpreter, then a pool's worker: every root goes.
        let nested = "process 1:\"sh -c \"$@\" ; s=$? ; echo $s > \"$0\" ; exit $s /r/st python a.py\";process 2:\"python a.py\";process 3:\"python -c x\";w (a.py:3)";
        assert_eq!(sampled_process(nested), (Some(3), "w (a.py:3)"));
    }

    #[test]
    fn an_address_takes_the_name_of_its_librarys_frame_beneath_it() {
        let p = parse(concat!(
            "0x7f1 (libc.so.6);main (a.py:3);deflate (libz.so.1);0x7f2 (libz.so.1);0x7f3 (libz.so.1) 5\n",
            "0x7f1 (libc.so.6);main (a.py:3);compress (zlibmodule.c:782);0x7f4 (libc.so.6) 2\n",
        ))
        .value;
        let row = |f: &str, file: &str| {
            p.by_self
                .iter()
                .find(|h| h.function == f && h.file.as_deref() == Some(file))
                .map(|h| h.self_samples)
        };
        assert_eq!(row("deflate", "libz.so.1"), Some(5));
        // Another library's frame beneath does not lend its name: memcpy under a C source.
        assert_eq!(row(UNSYMBOLIZED, "libc.so.6"), Some(2));
        assert!(p.by_total.iter().all(|h| !h.function.starts_with("0x")));
        // Recursion through the collapsed frames counts once in the total.
        assert_eq!(
            p.by_total
                .iter()
                .find(|h| h.function == "deflate")
                .map(|h| h.total_samples),
            Some(5)
        );
    }

    #[test]
    fn frames_and_counts() {
        assert_eq!(
            split_frame("hot (/x/hot.py:5)"),
            ("hot", Some("/x/hot.py"), Some(5))
        );
        assert_eq!(
            split_frame("<module> (<frozen site>:616)"),
            ("<module>", Some("<frozen site>"), Some(616))
        );
        assert_eq!(split_frame("memcpy"), ("memcpy", None, None));
        let p =
            parse("main (a.py:1);f (a.py:5);f (a.py:6) 3\nmain (a.py:1);g (a.py:9) 1\nbad line\n");
        let v = p.value;
        assert_eq!((v.total_samples, v.stacks), (4, 2));
        assert_eq!(p.diagnostics.len(), 1);
        let f = v.by_self.iter().find(|h| h.function == "f").unwrap();
        // Recursion: f is on 3 stacks' samples once, not twice.
        assert_eq!((f.self_samples, f.total_samples), (3, 3));
        assert_eq!(f.line, Some(6));
        let main = v.by_total.first().unwrap();
        assert_eq!(
            (
                main.function.as_str(),
                main.total_samples,
                main.self_samples
            ),
            ("main", 4, 0)
        );
        assert_eq!(v.lines[0].line, 6);
    }
}
