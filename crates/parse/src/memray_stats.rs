//! `memray stats --json`: totals, the allocator distribution, the top locations by size and
//! count (`"function:file:line"`), and the run's metadata with its peak memory.

use crate::Format;
use serde::Deserialize;
use std::collections::BTreeMap;
use system_profile_model::metrics::{AllocationProfile, AllocationTotal};
use system_profile_model::{Diag, Parsed};

pub struct MemrayStats;

impl Format for MemrayStats {
    const NAME: &'static str = "memray_stats";
    type Output = AllocationProfile;
    fn parse(input: &str) -> Parsed<AllocationProfile> {
        parse(input)
    }
}

#[derive(Deserialize)]
struct Location {
    location: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    count: Option<u64>,
}

#[derive(Deserialize, Default)]
struct Metadata {
    #[serde(default)]
    peak_memory: u64,
    #[serde(default)]
    python_allocator: Option<String>,
    #[serde(default)]
    has_native_traces: bool,
    #[serde(default)]
    trace_python_allocators: bool,
}

#[derive(Deserialize)]
struct Raw {
    total_num_allocations: u64,
    total_bytes_allocated: u64,
    #[serde(default)]
    allocator_type_distribution: BTreeMap<String, u64>,
    #[serde(default)]
    top_allocations_by_size: Vec<Location>,
    #[serde(default)]
    top_allocations_by_count: Vec<Location>,
    #[serde(default)]
    metadata: Metadata,
}

/// `function:file:line` → its parts; a location without a line keeps the file whole.
pub fn split_location(location: &str) -> (String, String, Option<u32>) {
    let (rest, line) = match location.rsplit_once(':') {
        Some((r, l)) if l.parse::<u32>().is_ok() => (r, l.parse().ok()),
        _ => (location, None),
    };
    match rest.split_once(':') {
        Some((function, file)) => (function.to_string(), file.to_string(), line),
        None => (String::new(), rest.to_string(), line),
    }
}

fn totals(rows: Vec<Location>) -> Vec<AllocationTotal> {
    rows.into_iter()
        .map(|r| {
            let (function, file, line) = split_location(&r.location);
            AllocationTotal {
                function,
                file,
                line,
                size_bytes: r.size,
                count: r.count,
            }
        })
        .collect()
}

pub fn parse(input: &str) -> Parsed<AllocationProfile> {
    match serde_json::from_str::<Raw>(input.trim()) {
        Ok(raw) => Parsed {
            value: AllocationProfile {
                peak_bytes: raw.metadata.peak_memory,
                total_allocations: raw.total_num_allocations,
                total_bytes_allocated: raw.total_bytes_allocated,
                top_by_size: totals(raw.top_allocations_by_size),
                top_by_count: totals(raw.top_allocations_by_count),
                allocator_distribution: raw.allocator_type_distribution,
                python_allocator: raw.metadata.python_allocator,
                native_traces: raw.metadata.has_native_traces,
                traces_python_allocators: raw.metadata.trace_python_allocators,
                sampled_every_bytes: None,
                // From `memray transform csv` (`memray_peak`), read beside.
                at_peak: Vec::new(),
                short_lived_large: Vec::new(),
                not_freed: Vec::new(),
            },
            diagnostics: Vec::new(),
        },
        Err(e) => Parsed {
            value: AllocationProfile::default(),
            diagnostics: vec![Diag::general(format!("not memray stats JSON: {e}"))],
        },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn locations() {
        assert_eq!(
            super::split_location("<listcomp>:/tmp/a.py:4"),
            ("<listcomp>".into(), "/tmp/a.py".into(), Some(4))
        );
        assert_eq!(
            super::split_location("malloc:libc.so.6"),
            ("malloc".into(), "libc.so.6".into(), None)
        );
    }
}
