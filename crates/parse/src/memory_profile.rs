//! The JSON the runner's memory_profiler helper writes (`MEMPROF_RUNNER`): memory_profiler's
//! per-line table of one function, `{"file", "function", "lines": [{"line", "source",
//! "occurrences", "mem_usage_mib", "increment_mib"}]}`; memory in MiB as memory_profiler
//! measures it (psutil RSS / 2^20).

use crate::Format;
use serde::Deserialize;
use system_profile_model::metrics::{MemoryLine, MemoryLineProfile};
use system_profile_model::{Diag, Parsed};

pub struct MemoryProfileJson;

impl Format for MemoryProfileJson {
    const NAME: &'static str = "memory_profile";
    type Output = MemoryLineProfile;
    fn parse(input: &str) -> Parsed<MemoryLineProfile> {
        parse(input)
    }
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    file: String,
    #[serde(default)]
    function: String,
    #[serde(default)]
    lines: Vec<serde_json::Value>,
}

pub fn parse(input: &str) -> Parsed<MemoryLineProfile> {
    let mut diagnostics = Vec::new();
    let raw: Raw = match serde_json::from_str(input) {
        Ok(r) => r,
        Err(e) => {
            diagnostics.push(Diag::general(format!(
                "not the memory_profiler helper's JSON: {e}"
            )));
            return Parsed {
                value: MemoryLineProfile::default(),
                diagnostics,
            };
        }
    };
    let mut lines = Vec::new();
    for (i, v) in raw.lines.iter().enumerate() {
        match serde_json::from_value::<MemoryLine>(v.clone()) {
            Ok(l) => lines.push(l),
            Err(e) => diagnostics.push(Diag::general(format!("line entry {i}: {e}"))),
        }
    }
    let top = lines
        .iter()
        .filter(|l| l.increment_mib.is_some_and(|x| x > 0.0))
        .max_by(|a, b| {
            a.increment_mib
                .unwrap_or(0.0)
                .total_cmp(&b.increment_mib.unwrap_or(0.0))
        })
        .map(|l| l.line);
    let peak = lines
        .iter()
        .filter_map(|l| l.mem_usage_mib)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    if lines.iter().all(|l| l.occurrences == 0) {
        diagnostics.push(Diag::general(format!("`{}` never ran", raw.function)));
    }
    Parsed {
        value: MemoryLineProfile {
            function: raw.function,
            file: raw.file,
            lines,
            top_increment_line: top,
            peak_mib: peak,
        },
        diagnostics,
    }
}
