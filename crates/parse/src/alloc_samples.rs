//! The allocation sampler's records (`runner`'s `py/sp_allocsample.c` writes them; its header
//! comment is the format): code objects, sampled allocations with their stacks, the sampled
//! blocks' frees, the exact totals. Each sample stands for the bytes and allocations a
//! Poisson sampler of mean `mean_bytes` would have skipped around it (the estimator of
//! tcmalloc's and Go's heap profiles: a block of `s` bytes is sampled with probability
//! `1 - exp(-s / mean)`, so it counts `1 / that` times). From them: the sites by bytes made
//! (innermost frame), the peak (the most estimated bytes live at once) and what was live then
//! by the program's line, large blocks freed soon after, and what was live at the end.

use crate::memray_peak::{Frame, SiteSums};
use std::collections::HashMap;
use system_profile_model::metrics::{
    AllocationProfile, AllocationTotal, PeakSite, ShortLivedSite, SHORT_LIVED_MIN_BYTES,
    SHORT_LIVED_WITHIN_ALLOCATIONS,
};
use system_profile_model::{Diag, Parsed};

/// Sites kept per list.
const SITES: usize = 20;

/// What the records say, with the process's peak resident set (for the share of it the
/// sampler could see).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    pub profile: AllocationProfile,
    pub max_rss_bytes: Option<u64>,
}

struct Sample {
    seq: u64,
    size: u64,
    frames: Vec<(u32, Option<u32>)>,
}

enum Event {
    Alloc(usize),
    Free { ptr: u64, seq: u64 },
}

/// Parse the records; `own(file)` says whether a file is the program's own code.
pub fn parse(input: impl std::io::BufRead, own: impl Fn(&str) -> bool) -> Parsed<Samples> {
    let mut diagnostics = Vec::new();
    let mut mean_bytes = None;
    let mut codes: HashMap<u32, (String, String)> = HashMap::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut ptrs: Vec<u64> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut totals = None;
    let mut max_rss_bytes = None;
    for (i, line) in input.lines().enumerate() {
        let line_no = i + 1;
        let Ok(line) = line else {
            diagnostics.push(Diag::at(line_no, "unreadable line"));
            break;
        };
        let mut fields = line.split(' ');
        let ok = match fields.next() {
            Some("#") => {
                mean_bytes = line
                    .split_once("mean_bytes=")
                    .and_then(|(_, v)| v.trim().parse::<f64>().ok())
                    .filter(|m| *m >= 1.0);
                mean_bytes.is_some()
            }
            Some("C") => (|| {
                let id = fields.next()?.parse().ok()?;
                let (name, file) = line.splitn(3, ' ').nth(2)?.split_once('\t')?;
                codes.insert(id, (name.to_string(), file.to_string()));
                Some(())
            })()
            .is_some(),
            Some("A") => (|| {
                let seq = fields.next()?.parse().ok()?;
                let ptr = u64::from_str_radix(fields.next()?, 16).ok()?;
                let size = fields.next()?.parse().ok()?;
                let frames = fields
                    .map(|f| {
                        let (id, line) = f.split_once(':')?;
                        Some((id.parse().ok()?, line.parse().ok().filter(|l| *l > 0)))
                    })
                    .collect::<Option<Vec<_>>>()?;
                events.push(Event::Alloc(samples.len()));
                samples.push(Sample { seq, size, frames });
                ptrs.push(ptr);
                Some(())
            })()
            .is_some(),
            Some("F") => (|| {
                let seq = fields.next()?.parse().ok()?;
                let ptr = u64::from_str_radix(fields.next()?, 16).ok()?;
                events.push(Event::Free { ptr, seq });
                Some(())
            })()
            .is_some(),
            Some("T") => (|| {
                let allocations: u64 = fields.next()?.parse().ok()?;
                let bytes: u64 = fields.next()?.parse().ok()?;
                totals = Some((allocations, bytes));
                Some(())
            })()
            .is_some(),
            Some("R") => (|| {
                let kb: u64 = fields.next()?.parse().ok()?;
                max_rss_bytes = Some(kb * 1024);
                Some(())
            })()
            .is_some(),
            Some("") => true,
            _ => false,
        };
        if !ok {
            diagnostics.push(Diag::at(line_no, format!("unreadable record: {line:.80}")));
        }
    }
    let Some(mean) = mean_bytes else {
        diagnostics.push(Diag::general(
            "not the allocation sampler's records: no `# sp-alloc-sample` header with mean_bytes",
        ));
        return Parsed {
            value: Samples::default(),
            diagnostics,
        };
    };
    if totals.is_none() {
        diagnostics.push(Diag::general(
            "the records end before the sampler's totals: the program ended without stopping it (killed, or `os._exit`); the sites cover the samples written",
        ));
    }
    // Each sample's share of the bytes and allocations around it.
    let weight = |size: u64| {
        let p = -(-(size as f64) / mean).exp_m1();
        if p > 0.0 {
            (size as f64 / p, 1.0 / p)
        } else {
            (0.0, 0.0)
        }
    };
    let frames_of = |s: &Sample| -> Vec<Frame> {
        s.frames
            .iter()
            .map(|(id, line)| {
                let (function, file) = codes
                    .get(id)
                    .map(|(n, f)| (n.as_str(), f.as_str()))
                    .unwrap_or(("?", "?"));
                Frame {
                    function,
                    file,
                    line: *line,
                }
            })
            .collect()
    };
    let no_frame = [Frame {
        function: "[no Python frame]",
        file: "[native thread]",
        line: None,
    }];
    // By the innermost frame: where the bytes were made.
    let mut made: HashMap<(String, String, Option<u32>), (f64, f64)> = HashMap::new();
    for s in &samples {
        let frames = frames_of(s);
        let f = frames.first().unwrap_or(&no_frame[0]);
        let (bytes, count) = weight(s.size);
        let e = made
            .entry((f.function.to_string(), f.file.to_string(), f.line))
            .or_default();
        e.0 += bytes;
        e.1 += count;
    }
    // Replay: the live estimate, its highest point, and the large blocks freed soon.
    let mut live: HashMap<u64, usize> = HashMap::new();
    let (mut live_bytes, mut peak_bytes, mut peak_at) = (0.0f64, 0.0f64, 0usize);
    let mut short_lived: Vec<(usize, f64)> = Vec::new();
    for (at, event) in events.iter().enumerate() {
        match *event {
            Event::Alloc(i) => {
                if let Some(old) = live.insert(ptrs[i], i) {
                    live_bytes -= weight(samples[old].size).0;
                }
                live_bytes += weight(samples[i].size).0;
                if live_bytes > peak_bytes {
                    (peak_bytes, peak_at) = (live_bytes, at + 1);
                }
            }
            Event::Free { ptr, seq } => {
                if let Some(i) = live.remove(&ptr) {
                    let (bytes, _) = weight(samples[i].size);
                    live_bytes -= bytes;
                    if samples[i].size >= SHORT_LIVED_MIN_BYTES
                        && seq.saturating_sub(samples[i].seq) <= SHORT_LIVED_WITHIN_ALLOCATIONS
                    {
                        short_lived.push((i, bytes));
                    }
                }
            }
        }
    }
    let by_program_line = |blocks: &mut dyn Iterator<Item = (usize, f64)>| -> Vec<PeakSite> {
        let mut sums = SiteSums::default();
        for (i, bytes) in blocks {
            let frames = frames_of(&samples[i]);
            let frames = if frames.is_empty() {
                &no_frame[..]
            } else {
                &frames[..]
            };
            let count = weight(samples[i].size).1;
            sums.add(frames, bytes.round() as u64, count.round() as u64, &own);
        }
        sums.finish()
    };
    // What was live just after the highest point.
    let mut at_peak_live: HashMap<u64, usize> = HashMap::new();
    for event in &events[..peak_at] {
        match *event {
            Event::Alloc(i) => {
                at_peak_live.insert(ptrs[i], i);
            }
            Event::Free { ptr, .. } => {
                at_peak_live.remove(&ptr);
            }
        }
    }
    let at_peak = by_program_line(
        &mut at_peak_live
            .values()
            .map(|&i| (i, weight(samples[i].size).0)),
    );
    let not_freed = by_program_line(&mut live.values().map(|&i| (i, weight(samples[i].size).0)));
    let short_lived_large = by_program_line(&mut short_lived.into_iter())
        .into_iter()
        .map(ShortLivedSite::from)
        .collect();
    let top = |key: fn(&(f64, f64)) -> f64| -> Vec<AllocationTotal> {
        let mut rows: Vec<_> = made.iter().collect();
        rows.sort_by(|a, b| key(b.1).total_cmp(&key(a.1)).then_with(|| a.0.cmp(b.0)));
        rows.into_iter()
            .take(SITES)
            .map(|((function, file, line), (bytes, count))| AllocationTotal {
                function: function.clone(),
                file: file.clone(),
                line: *line,
                size_bytes: Some(bytes.round() as u64),
                count: Some(count.round() as u64),
            })
            .collect()
    };
    let (total_allocations, total_bytes_allocated) = totals.unwrap_or_else(|| {
        let (b, c) = samples
            .iter()
            .map(|s| weight(s.size))
            .fold((0.0, 0.0), |a, w| (a.0 + w.0, a.1 + w.1));
        (c.round() as u64, b.round() as u64)
    });
    Parsed {
        value: Samples {
            profile: AllocationProfile {
                peak_bytes: peak_bytes.round() as u64,
                total_allocations,
                total_bytes_allocated,
                top_by_size: top(|v| v.0),
                top_by_count: top(|v| v.1),
                allocator_distribution: Default::default(),
                python_allocator: None,
                native_traces: false,
                traces_python_allocators: true,
                sampled_every_bytes: Some(mean.round() as u64),
                at_peak,
                short_lived_large,
                not_freed,
            },
            max_rss_bytes,
        },
        diagnostics,
    }
}
