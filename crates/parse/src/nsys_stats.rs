//! `nsys stats` text output (any version's framing: `** CUDA GPU Kernel Summary
//! (cuda_gpu_kern_sum):` headings of 2024.x, `[5/8] Executing 'cuda_gpu_kern_sum' stats
//! report` lines of later ones, progress bars and warnings between them). Every report is a
//! fixed-width table: a header line, a line of dash runs that gives each column's extent, then
//! rows; the last column (a name) runs to the end of the line and may hold spaces. Numbers
//! may carry thousands separators. Times are ns (turned into µs); sizes MB of 10^6 bytes.

use crate::kineto::category;
use crate::Format;
use std::collections::BTreeMap;
use system_profile_model::metrics::{
    NsysCall, NsysRange, NsysStats, TraceCategory, TraceCopies, TraceKernel,
};
use system_profile_model::{Diag, Parsed};

pub struct NsysStatsText;

impl Format for NsysStatsText {
    const NAME: &'static str = "nsys_stats";
    type Output = NsysStats;
    fn parse(input: &str) -> Parsed<NsysStats> {
        parse(input)
    }
}

/// One table: its column names and rows of cells.
struct Table {
    report: String,
    columns: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn at(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
    fn num(&self, row: &[String], name: &str) -> Option<f64> {
        let cell = row.get(self.at(name)?)?;
        cell.replace(',', "").trim().parse().ok()
    }
    fn text(&self, row: &[String], name: &str) -> Option<String> {
        Some(row.get(self.at(name)?)?.trim().to_string())
    }
}

/// The report a line announces, if it announces one.
fn report_name(line: &str) -> Option<String> {
    let t = line.trim();
    if let Some(rest) = t.strip_prefix("** ") {
        // ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):
        let open = rest.rfind('(')?;
        let close = rest.rfind(')')?;
        return (close > open).then(|| rest[open + 1..close].to_string());
    }
    if t.contains("Executing '") && t.ends_with("stats report") {
        let start = t.find("Executing '")? + "Executing '".len();
        let end = t[start..].find('\'')? + start;
        return Some(t[start..end].to_string());
    }
    None
}

/// Column extents from a dash line: (start, end) byte ranges; the last runs to the end.
fn extents(dashes: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let bytes = dashes.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'-' {
            let start = i;
            while i < bytes.len() && bytes[i] == b'-' {
                i += 1;
            }
            out.push((start, i));
        } else {
            i += 1;
        }
    }
    out
}

/// Cut `line` at the extents: each cell from the end of the previous column to the end of
/// its own (numbers are right-aligned), the last to the end of the line.
fn cells(line: &str, ext: &[(usize, usize)]) -> Vec<String> {
    let mut out = Vec::with_capacity(ext.len());
    let mut from = 0;
    for (k, (_, end)) in ext.iter().enumerate() {
        let to = if k + 1 == ext.len() {
            line.len()
        } else {
            (*end).min(line.len())
        };
        let cell = line
            .get(from.min(line.len())..to.max(from).min(line.len()))
            .unwrap_or("");
        out.push(cell.trim().to_string());
        from = to;
    }
    out
}

fn copy_direction(operation: &str) -> &'static str {
    let o = operation.to_ascii_lowercase();
    if o.contains("host-to-device") {
        "HtoD"
    } else if o.contains("device-to-host") {
        "DtoH"
    } else if o.contains("device-to-device") {
        "DtoD"
    } else if o.contains("peer-to-peer") {
        "PtoP"
    } else if o.contains("memset") {
        "memset"
    } else {
        "other"
    }
}

pub fn parse(input: &str) -> Parsed<NsysStats> {
    let input = crate::strip_ansi(input);
    let mut diagnostics = Vec::new();
    let mut out = NsysStats::default();
    let mut tables: Vec<Table> = Vec::new();
    let mut report: Option<String> = None;
    let lines: Vec<&str> = input.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(name) = report_name(line) {
            report = Some(name);
            i += 1;
            continue;
        }
        if line.trim_start().starts_with("SKIPPED:") {
            out.skipped.push(
                line.trim()
                    .trim_start_matches("SKIPPED:")
                    .trim()
                    .to_string(),
            );
            i += 1;
            continue;
        }
        // A header is followed by its dash line.
        let is_dashes =
            |l: &str| !l.trim().is_empty() && l.trim().chars().all(|c| c == '-' || c == ' ');
        if i + 1 < lines.len()
            && is_dashes(lines[i + 1])
            && !is_dashes(line)
            && !line.trim().is_empty()
        {
            let ext = extents(lines[i + 1]);
            let columns = cells(line, &ext);
            let mut rows = Vec::new();
            let mut j = i + 2;
            while j < lines.len() && !lines[j].trim().is_empty() && report_name(lines[j]).is_none()
            {
                rows.push(cells(lines[j], &ext));
                j += 1;
            }
            match report.take() {
                Some(r) => tables.push(Table {
                    report: r,
                    columns,
                    rows,
                }),
                None => diagnostics.push(Diag::at(
                    i + 1,
                    "a table without a report name before it: skipped",
                )),
            }
            i = j;
            continue;
        }
        i += 1;
    }
    let us = |ns: f64| ns / 1000.0;
    let mut copies: BTreeMap<&'static str, TraceCopies> = BTreeMap::new();
    for t in &tables {
        out.reports.push(t.report.clone());
        match t.report.as_str() {
            "cuda_gpu_kern_sum" => {
                for r in &t.rows {
                    let (Some(name), Some(total), Some(count)) = (
                        t.text(r, "Name"),
                        t.num(r, "Total Time (ns)"),
                        t.num(r, "Instances"),
                    ) else {
                        diagnostics.push(Diag::general(format!(
                            "cuda_gpu_kern_sum: an unreadable row {r:?}"
                        )));
                        continue;
                    };
                    out.kernels.push(TraceKernel {
                        category: category(&name).to_string(),
                        name,
                        count: count as u64,
                        total_us: us(total),
                        mean_us: us(t.num(r, "Avg (ns)").unwrap_or(0.0)),
                        min_us: us(t.num(r, "Min (ns)").unwrap_or(0.0)),
                        max_us: us(t.num(r, "Max (ns)").unwrap_or(0.0)),
                        percent: t.num(r, "Time (%)").unwrap_or(0.0),
                    });
                }
            }
            "cuda_gpu_mem_time_sum" | "cuda_gpu_mem_size_sum" => {
                for r in &t.rows {
                    let Some(op) = t.text(r, "Operation") else {
                        continue;
                    };
                    let c = copies
                        .entry(copy_direction(&op))
                        .or_insert_with(|| TraceCopies {
                            direction: copy_direction(&op).to_string(),
                            count: 0,
                            bytes: 0,
                            total_us: 0.0,
                            bandwidth_gbps: 0.0,
                            size_buckets: Vec::new(),
                            bytes_p50: None,
                            bytes_p95: None,
                            duration_us_p50: None,
                            duration_us_p95: None,
                            pageable_count: None,
                            vs_peak: None,
                        });
                    if t.report == "cuda_gpu_mem_time_sum" {
                        c.count += t.num(r, "Count").unwrap_or(0.0) as u64;
                        c.total_us += us(t.num(r, "Total Time (ns)").unwrap_or(0.0));
                    } else {
                        c.bytes += (t.num(r, "Total (MB)").unwrap_or(0.0) * 1e6) as u64;
                    }
                }
            }
            "cuda_api_sum" | "osrt_sum" => {
                let calls: Vec<NsysCall> = t
                    .rows
                    .iter()
                    .filter_map(|r| {
                        Some(NsysCall {
                            name: t.text(r, "Name")?,
                            calls: t.num(r, "Num Calls")? as u64,
                            total_us: us(t.num(r, "Total Time (ns)")?),
                            mean_us: us(t.num(r, "Avg (ns)").unwrap_or(0.0)),
                            max_us: us(t.num(r, "Max (ns)").unwrap_or(0.0)),
                            percent: t.num(r, "Time (%)").unwrap_or(0.0),
                        })
                    })
                    .collect();
                if calls.len() != t.rows.len() {
                    diagnostics.push(Diag::general(format!(
                        "{}: {} rows unreadable",
                        t.report,
                        t.rows.len() - calls.len()
                    )));
                }
                if t.report == "cuda_api_sum" {
                    out.cuda_api = calls;
                } else {
                    out.os_runtime = calls;
                }
            }
            "nvtx_sum" | "nvtx_pushpop_sum" => {
                out.nvtx = t
                    .rows
                    .iter()
                    .filter_map(|r| {
                        Some(NsysRange {
                            name: t.text(r, "Range").or_else(|| t.text(r, "Name"))?,
                            style: t.text(r, "Style"),
                            instances: t.num(r, "Instances")? as u64,
                            total_us: us(t.num(r, "Total Time (ns)")?),
                            mean_us: us(t.num(r, "Avg (ns)").unwrap_or(0.0)),
                        })
                    })
                    .collect();
            }
            _ => {}
        }
    }
    out.copies = copies
        .into_values()
        .map(|mut c| {
            if c.total_us > 0.0 {
                c.bandwidth_gbps = c.bytes as f64 / (c.total_us * 1e-6) / 1e9;
            }
            c
        })
        .collect();
    let kernel_us: f64 = out.kernels.iter().map(|k| k.total_us).sum();
    let mut cats: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for k in &out.kernels {
        let c = cats.entry(k.category.clone()).or_default();
        c.0 += k.count;
        c.1 += k.total_us;
    }
    out.categories = cats
        .into_iter()
        .map(|(category, (count, total_us))| TraceCategory {
            category,
            count,
            total_us,
            percent: if kernel_us > 0.0 {
                total_us / kernel_us * 100.0
            } else {
                0.0
            },
        })
        .collect();
    out.categories
        .sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
    let launch = out
        .cuda_api
        .iter()
        .filter(|c| c.name.starts_with("cudaLaunchKernel") || c.name.starts_with("cuLaunchKernel"));
    let (launches, launch_us) = launch.fold((0, 0.0), |(n, t), c| (n + c.calls, t + c.total_us));
    out.launches.launches = launches;
    out.launches.launch_api_us = launch_us;
    out.launches.launch_api_mean_us = if launches > 0 {
        launch_us / launches as f64
    } else {
        0.0
    };
    out.launches.kernels = out.kernels.iter().map(|k| k.count).sum();
    out.launches.kernel_us = kernel_us;
    if tables.is_empty() {
        diagnostics.push(Diag::general(
            "no report table: not `nsys stats` output, or every report was skipped",
        ));
    }
    Parsed {
        value: out,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_width_cells_with_spaces_in_the_last_column() {
        let text = "[7/8] Executing 'cuda_gpu_mem_time_sum' stats report\n\n Time (%)  Total Time (ns)  Count           Operation          \n --------  ---------------  -----  ----------------------------\n    100.0        1,234,000      2  [CUDA memcpy Host-to-Device]\n";
        let p = parse(text);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let c = &p.value.copies[0];
        assert_eq!(
            (c.direction.as_str(), c.count, c.total_us),
            ("HtoD", 2, 1234.0)
        );
        assert!(!parse("nothing here").diagnostics.is_empty());
    }
}
