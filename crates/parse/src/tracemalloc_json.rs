//! The tracemalloc runner's report (written by `runner`'s TRACEMALLOC_RUNNER): peak and exit
//! totals, site lists as `[file, line, size, count]`, a `[t, current, peak]` timeline, and the
//! resident cost of the script's leading imports.

use crate::Format;
use serde::Deserialize;
use system_profile_model::metrics::{AllocationSite, ImportCost, PythonMemoryProfile};
use system_profile_model::{Diag, Parsed};

pub struct TracemallocJson;

impl Format for TracemallocJson {
    const NAME: &'static str = "tracemalloc_json";
    type Output = PythonMemoryProfile;
    fn parse(input: &str) -> Parsed<PythonMemoryProfile> {
        parse(input)
    }
}

type Site = (String, u32, u64, u64);

#[derive(Deserialize)]
struct Raw {
    current: u64,
    peak: u64,
    depth: u32,
    #[serde(default)]
    peak_sites: Vec<Site>,
    #[serde(default)]
    peak_sites_at: u64,
    #[serde(default)]
    exit_sites: Vec<Site>,
    #[serde(default)]
    timeline: Vec<(f64, u64, u64)>,
    #[serde(default)]
    rss_before_imports: Option<u64>,
    #[serde(default)]
    imports: Vec<ImportCost>,
}

fn sites(raw: &[Site]) -> Vec<AllocationSite> {
    raw.iter()
        .map(|(file, line, size, count)| AllocationSite {
            file: file.clone(),
            line: *line,
            size_bytes: *size,
            count: *count,
        })
        .collect()
}

pub fn parse(input: &str) -> Parsed<PythonMemoryProfile> {
    let raw: Raw = match serde_json::from_str(input.trim()) {
        Ok(r) => r,
        Err(e) => {
            return Parsed {
                value: PythonMemoryProfile::default(),
                diagnostics: vec![Diag::general(format!("not a tracemalloc report: {e}"))],
            }
        }
    };
    let key = |s: &AllocationSite| (s.file.clone(), s.line);
    let mut by_size = sites(&raw.exit_sites);
    by_size.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| key(a).cmp(&key(b)))
    });
    let mut by_count = by_size.clone();
    by_count.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| key(a).cmp(&key(b))));
    by_size.truncate(30);
    by_count.truncate(30);
    let mut peak = sites(&raw.peak_sites);
    peak.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| key(a).cmp(&key(b)))
    });
    peak.truncate(30);
    Parsed {
        value: PythonMemoryProfile {
            rss_before_imports_bytes: raw.rss_before_imports.filter(|b| *b > 0),
            imports: raw.imports,
            current_bytes: raw.current,
            peak_bytes: raw.peak,
            peak_sites_by_size: peak,
            peak_sites_at_bytes: raw.peak_sites_at,
            exit_sites_by_size: by_size,
            exit_sites_by_count: by_count,
            timeline: raw.timeline,
            traceback_depth: raw.depth,
        },
        diagnostics: Vec::new(),
    }
}
