//! cProfile's stats as the runner's converter writes them: a JSON array of
//! `[file, line, function, primitive_calls, calls, tottime_s, cumtime_s]` rows, one per
//! function of the pstats file (pstats itself is a marshal format only Python reads).

use crate::Format;
use system_profile_model::metrics::{CallProfile, FunctionStat};
use system_profile_model::{Diag, Parsed};

pub struct CprofileRows;

impl Format for CprofileRows {
    const NAME: &'static str = "cprofile_json";
    type Output = CallProfile;
    fn parse(input: &str) -> Parsed<CallProfile> {
        parse(input)
    }
}

type Row = (String, u32, String, u64, u64, f64, f64);

pub fn parse(input: &str) -> Parsed<CallProfile> {
    let rows: Vec<Row> = match serde_json::from_str(input.trim()) {
        Ok(r) => r,
        Err(e) => {
            return Parsed {
                value: CallProfile::default(),
                diagnostics: vec![Diag::general(format!("not cProfile rows: {e}"))],
            }
        }
    };
    let mut all: Vec<FunctionStat> = rows
        .into_iter()
        .map(
            |(file, line, function, primitive_calls, calls, tottime_s, cumtime_s)| FunctionStat {
                function,
                file,
                line,
                calls,
                primitive_calls,
                tottime_s,
                cumtime_s,
            },
        )
        .collect();
    let mut p = CallProfile {
        total_calls: all.iter().map(|f| f.calls).sum(),
        primitive_calls: all.iter().map(|f| f.primitive_calls).sum(),
        total_time_s: all.iter().map(|f| f.tottime_s).sum(),
        functions: all.len() as u64,
        ..Default::default()
    };
    let key = |f: &FunctionStat| (f.file.clone(), f.line, f.function.clone());
    all.sort_by(|a, b| {
        b.tottime_s
            .total_cmp(&a.tottime_s)
            .then_with(|| key(a).cmp(&key(b)))
    });
    p.by_tottime = all.iter().take(50).cloned().collect();
    all.sort_by(|a, b| {
        b.cumtime_s
            .total_cmp(&a.cumtime_s)
            .then_with(|| key(a).cmp(&key(b)))
    });
    all.truncate(50);
    p.by_cumtime = all;
    Parsed {
        value: p,
        diagnostics: Vec::new(),
    }
}
