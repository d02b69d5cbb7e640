//! `memray transform csv`: the allocations live at the capture's high-water mark, one row per
//! stack (`allocator,num_allocations,size,tid,thread_name,stack_trace`; the stack innermost
//! first, frames `function;file;line` joined by `|`). Summed by the program's own line that
//! led to each allocation: the innermost frame `own` accepts, else the innermost frame.

use std::collections::HashMap;
use system_profile_model::metrics::PeakSite;
use system_profile_model::{Diag, Parsed};

/// Sites kept, largest first.
pub const SITES: usize = 20;

/// One frame of an allocation's stack.
pub(crate) struct Frame<'a> {
    pub function: &'a str,
    pub file: &'a str,
    pub line: Option<u32>,
}

fn frame(text: &str) -> Option<Frame<'_>> {
    // A function or file name may hold `;`: the line is the last field, the function the first.
    let (rest, line) = text.rsplit_once(';')?;
    let (function, file) = rest.split_once(';')?;
    Some(Frame {
        function,
        file,
        line: line.parse().ok(),
    })
}

#[derive(Default)]
struct Sum {
    live_bytes: u64,
    allocations: u64,
    imported_bytes: u64,
    /// Library frame → bytes it allocated for this site.
    via: HashMap<String, u64>,
}

/// Parse the CSV; `own(file)` says whether a file is the program's own code.
pub fn parse(input: &str, own: impl Fn(&str) -> bool) -> Parsed<Vec<PeakSite>> {
    parse_at_least(input, own, 0)
}

/// The same, counting only rows whose allocations average at least
/// `min_bytes_per_allocation` (the large buffers among memray's temporary allocations).
pub fn parse_at_least(
    input: &str,
    own: impl Fn(&str) -> bool,
    min_bytes_per_allocation: u64,
) -> Parsed<Vec<PeakSite>> {
    parse_reader(input.as_bytes(), own, min_bytes_per_allocation)
}

/// The same from a reader, row by row: memray's CSV of a framework's run can be gigabytes
/// (1.65 GB of peak stacks for a Lightning training), and only the sums are kept.
pub fn parse_reader(
    input: impl std::io::Read,
    own: impl Fn(&str) -> bool,
    min_bytes_per_allocation: u64,
) -> Parsed<Vec<PeakSite>> {
    let mut diagnostics = Vec::new();
    let mut sums = SiteSums::default();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(input);
    let headers = reader.headers().cloned().unwrap_or_default();
    let column = |name: &str| headers.iter().position(|h| h == name);
    let (Some(count_at), Some(size_at), Some(stack_at)) = (
        column("num_allocations"),
        column("size"),
        column("stack_trace"),
    ) else {
        return Parsed {
            value: Vec::new(),
            diagnostics: vec![Diag::general(
                "not memray's CSV: no num_allocations, size and stack_trace columns",
            )],
        };
    };
    for (i, record) in reader.records().enumerate() {
        // Line 1 is the header.
        let line_no = i + 2;
        let Ok(record) = record else {
            diagnostics.push(Diag::at(line_no, "unreadable CSV row"));
            continue;
        };
        let number = |at: usize| record.get(at).and_then(|v| v.trim().parse::<u64>().ok());
        let (Some(allocations), Some(size)) = (number(count_at), number(size_at)) else {
            diagnostics.push(Diag::at(line_no, "row without a size or count"));
            continue;
        };
        if size < min_bytes_per_allocation.saturating_mul(allocations) {
            continue;
        }
        let frames: Vec<Frame> = record
            .get(stack_at)
            .unwrap_or("")
            .split('|')
            .filter_map(frame)
            .collect();
        if !sums.add(&frames, size, allocations, &own) {
            diagnostics.push(Diag::at(line_no, "row without a stack"));
        }
    }
    let sites = sums.finish();
    Parsed {
        value: sites,
        diagnostics,
    }
}

/// Allocations summed by the program's own line that led to each: the innermost frame `own`
/// accepts, else the innermost frame; with the library frame that made most of a site's bytes
/// (`via`) and what imports made.
#[derive(Default)]
pub(crate) struct SiteSums {
    sums: HashMap<(String, String, Option<u32>), Sum>,
}

impl SiteSums {
    /// Add `bytes` in `allocations` made at `frames` (innermost first); false for no frames.
    pub fn add(
        &mut self,
        frames: &[Frame],
        bytes: u64,
        allocations: u64,
        own: impl Fn(&str) -> bool,
    ) -> bool {
        let Some(innermost) = frames.first() else {
            return false;
        };
        let at = frames.iter().position(|f| own(f.file)).unwrap_or(0);
        let site = &frames[at];
        // Made while the line imported a module: the import machinery stands between.
        let imported = frames[..at]
            .iter()
            .any(|f| f.file.starts_with("<frozen importlib"));
        let sum = self
            .sums
            .entry((site.function.to_string(), site.file.to_string(), site.line))
            .or_default();
        sum.live_bytes += bytes;
        sum.allocations += allocations;
        if imported {
            sum.imported_bytes += bytes;
        }
        if !own(innermost.file) && at != 0 {
            let line = innermost.line.map(|l| format!(":{l}")).unwrap_or_default();
            *sum.via
                .entry(format!("{} ({}{line})", innermost.function, innermost.file))
                .or_default() += bytes;
        }
        true
    }

    /// The `SITES` largest, largest first.
    pub fn finish(self) -> Vec<PeakSite> {
        let mut sites: Vec<PeakSite> = self
            .sums
            .into_iter()
            .map(|((function, file, line), sum)| PeakSite {
                function,
                file,
                line,
                live_bytes: sum.live_bytes,
                allocations: sum.allocations,
                imported_bytes: sum.imported_bytes,
                via: sum
                    .via
                    .into_iter()
                    .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
                    .map(|(frame, _)| frame),
            })
            .collect();
        sites.sort_by(|a, b| {
            b.live_bytes
                .cmp(&a.live_bytes)
                .then_with(|| (&a.file, a.line).cmp(&(&b.file, b.line)))
        });
        sites.truncate(SITES);
        sites
    }
}
