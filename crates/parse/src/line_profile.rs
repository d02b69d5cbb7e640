//! line_profiler's stats for one function as the runner's converter writes them:
//! `{"function", "file", "lines": [[line, hits, seconds, source], ...]}`.

use crate::Format;
use serde::Deserialize;
use system_profile_model::metrics::{LineProfile, LineStat};
use system_profile_model::{Diag, Parsed};

pub struct LineProfileJson;

impl Format for LineProfileJson {
    const NAME: &'static str = "line_profile";
    type Output = LineProfile;
    fn parse(input: &str) -> Parsed<LineProfile> {
        parse(input)
    }
}

#[derive(Deserialize)]
struct Raw {
    function: String,
    file: String,
    lines: Vec<(u32, u64, f64, String)>,
}

pub fn parse(input: &str) -> Parsed<LineProfile> {
    let raw: Raw = match serde_json::from_str(input.trim()) {
        Ok(r) => r,
        Err(e) => {
            return Parsed {
                value: LineProfile::default(),
                diagnostics: vec![Diag::general(format!("not line_profiler rows: {e}"))],
            }
        }
    };
    let total: f64 = raw.lines.iter().map(|l| l.2).sum();
    let mut lines: Vec<LineStat> = raw
        .lines
        .into_iter()
        .map(|(line, hits, time_s, source)| LineStat {
            line,
            hits,
            time_s,
            percent: if total > 0.0 {
                time_s * 100.0 / total
            } else {
                0.0
            },
            source,
        })
        .collect();
    lines.sort_by_key(|l| l.line);
    Parsed {
        value: LineProfile {
            function: raw.function,
            file: raw.file,
            total_time_s: total,
            lines,
        },
        diagnostics: Vec::new(),
    }
}
