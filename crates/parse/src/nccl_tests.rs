//! nccl-tests output (`all_reduce_perf`, `all_gather_perf`, ...): the `# Using devices` list,
//! then one row per message size, out of place and in place (time µs, algbw and busbw GB/s,
//! `#wrong`), in the newer layout (with `root`) and the older one (without it, `error` instead
//! of `#wrong`); then `# Avg bus bandwidth`.

use crate::Format;
use system_profile_model::metrics::{NcclTestsReport, NcclTestsRow};
use system_profile_model::{Diag, Parsed};

pub struct NcclTests;

impl Format for NcclTests {
    const NAME: &'static str = "nccl_tests";
    type Output = NcclTestsReport;
    fn parse(input: &str) -> Parsed<NcclTestsReport> {
        parse(input)
    }
}

pub fn parse(input: &str) -> Parsed<NcclTestsReport> {
    let mut diagnostics = Vec::new();
    let mut report = NcclTestsReport::default();
    // Whether the header had a `root` column (newer nccl-tests).
    let mut with_root: Option<bool> = None;
    for (i, line) in input.lines().enumerate() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix('#') {
            let rest = rest.trim();
            if rest.starts_with("Rank ") {
                report.ranks += 1;
                if report.gpu.is_none() {
                    // ... device  0 [0000:04:00] NVIDIA H100 80GB HBM3
                    report.gpu = rest.rsplit_once(']').map(|(_, g)| g.trim().to_string());
                }
            } else if rest.starts_with("size") {
                with_root = Some(rest.split_whitespace().any(|w| w == "root"));
            } else if let Some(v) = rest.strip_prefix("Avg bus bandwidth") {
                report.avg_busbw_gbps = v.trim_start_matches([' ', ':']).trim().parse().ok();
            } else if rest.starts_with("Out of bounds values") {
                report.out_of_bounds_ok = rest.ends_with("OK");
            }
            continue;
        }
        if t.is_empty() {
            continue;
        }
        let Some(root) = with_root else {
            continue;
        };
        let w: Vec<&str> = t.split_whitespace().collect();
        let base = if root { 5 } else { 4 };
        if w.len() != base + 8 {
            diagnostics.push(Diag::at(i + 1, format!("not a table row: {t:?}")));
            continue;
        }
        let f = |k: usize| w[k].parse::<f64>().ok();
        let row = (|| {
            Some(NcclTestsRow {
                size_bytes: w[0].parse().ok()?,
                count: w[1].parse().ok()?,
                datatype: w[2].to_string(),
                redop: w[3].to_string(),
                out_of_place_time_us: f(base)?,
                out_of_place_algbw_gbps: f(base + 1)?,
                out_of_place_busbw_gbps: f(base + 2)?,
                out_of_place_wrong: w[base + 3].to_string(),
                in_place_time_us: f(base + 4)?,
                in_place_algbw_gbps: f(base + 5)?,
                in_place_busbw_gbps: f(base + 6)?,
                in_place_wrong: w[base + 7].to_string(),
            })
        })();
        match row {
            Some(r) => report.rows.push(r),
            None => diagnostics.push(Diag::at(i + 1, format!("unreadable row: {t:?}"))),
        }
    }
    if let Some(best) = report.rows.iter().max_by(|a, b| {
        a.out_of_place_busbw_gbps
            .total_cmp(&b.out_of_place_busbw_gbps)
    }) {
        report.peak_busbw_gbps = Some(best.out_of_place_busbw_gbps);
        report.peak_busbw_size_bytes = Some(best.size_bytes);
    }
    if with_root.is_none() {
        diagnostics.push(Diag::general("no `# size` header: not nccl-tests output"));
    }
    Parsed {
        value: report,
        diagnostics,
    }
}
