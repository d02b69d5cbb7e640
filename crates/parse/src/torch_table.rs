//! torch.profiler's own operator table, as `key_averages().table()` prints it (vLLM writes one
//! per worker, `*.profiler_out.txt`): fixed-width columns under a header, between dash lines.
//! Read by the header's names, so a table with more or fewer columns (CUDA's) reads the same.

use crate::Format;
use system_profile_model::metrics::CpuOp;
use system_profile_model::{Diag, Parsed};

pub struct TorchTable;

impl Format for TorchTable {
    const NAME: &'static str = "torch_table";
    type Output = Vec<CpuOp>;
    fn parse(input: &str) -> Parsed<Vec<CpuOp>> {
        parse(input)
    }
}

/// `818.059ms`, `22.003us`, `1.385s` as µs.
fn duration_us(text: &str) -> Option<f64> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ns") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e6)
    } else {
        return None;
    };
    number.trim().parse::<f64>().ok().map(|v| v * scale)
}

/// Cells of a row: runs separated by two or more spaces, right-aligned under the header.
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

pub fn parse(input: &str) -> Parsed<Vec<CpuOp>> {
    let mut ops = Vec::new();
    let mut diagnostics = Vec::new();
    let mut header: Option<Vec<String>> = None;
    for (i, line) in input.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('-') {
            continue;
        }
        let row = cells(line);
        if header.is_none() {
            if row.first() == Some(&"Name") {
                header = Some(row.iter().map(|c| c.to_string()).collect());
            }
            continue;
        }
        let Some(names) = header.as_ref() else {
            continue;
        };
        if trimmed.starts_with("Self CPU time total") || trimmed.starts_with("Self CUDA time total")
        {
            continue;
        }
        if row.len() != names.len() {
            diagnostics.push(Diag::at(
                i + 1,
                format!("{} cells under {} columns: skipped", row.len(), names.len()),
            ));
            continue;
        }
        let cell = |name: &str| names.iter().position(|n| n == name).map(|k| row[k]);
        let (Some(self_us), Some(total_us), Some(calls)) = (
            cell("Self CPU").and_then(duration_us),
            cell("CPU total").and_then(duration_us),
            cell("# of Calls").and_then(|c| c.parse::<u64>().ok()),
        ) else {
            diagnostics.push(Diag::at(
                i + 1,
                "a row without Self CPU, CPU total or # of Calls: skipped",
            ));
            continue;
        };
        let self_percent = cell("Self CPU %")
            .and_then(|c| c.trim_end_matches('%').parse::<f64>().ok())
            .unwrap_or(0.0);
        ops.push(CpuOp {
            name: row[0].to_string(),
            calls,
            self_us,
            total_us,
            self_percent,
            shapes: Vec::new(),
            shape_self_percent: Vec::new(),
        });
    }
    if header.is_none() {
        diagnostics.push(Diag::general(
            "no `Name` header: not a torch.profiler table",
        ));
    }
    Parsed {
        value: ops,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_read_as_microseconds() {
        assert_eq!(duration_us("818.059ms"), Some(818_059.0));
        assert_eq!(duration_us("1.385s"), Some(1_385_000.0));
        assert_eq!(duration_us("0.368us"), Some(0.368));
        assert_eq!(duration_us("12"), None);
    }
}
