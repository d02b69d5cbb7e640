//! `nvidia-smi dmon` (any `-s` column set, with or without `-o D`/`-o T`): one row per GPU per
//! interval under a `# gpu ...` header and a `# Idx ...` units line, `-` for values the device
//! does not report. Readings become `GpuSample`s:
//! `sm`, `mem` (percent), `pwr` (W), `gtemp` (°C), `mclk`, `pclk` (MHz; pclk is the SM clock),
//! `fb` (MB, which nvidia-smi means as MiB), `rxpci`, `txpci` (MB/s, likewise MiB/s). Other
//! columns (enc, dec, jpg, ofa, mtemp, bar1, ccpm, pviol, tviol, sbecc, dbecc, pci) are named in
//! `other_columns`. Time: the `Time` column when present (seconds since the first row),
//! else the row's round times the interval the caller asked dmon for.

use crate::Format;
use system_profile_model::metrics::{GpuReadings, GpuSample};
use system_profile_model::{Diag, Parsed};

pub struct NvidiaSmiDmon;

impl Format for NvidiaSmiDmon {
    const NAME: &'static str = "nvidia_smi_dmon";
    type Output = GpuReadings;
    fn parse(input: &str) -> Parsed<GpuReadings> {
        parse(input, 1.0)
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// `HH:MM:SS` as seconds of the day.
fn clock_s(t: &str) -> Option<f64> {
    let mut f = t.split(':').map(|x| x.parse::<f64>().ok());
    Some(f.next()?? * 3600.0 + f.next()?? * 60.0 + f.next()??)
}

/// Parse dmon's text; `interval_s` is dmon's `-d` (1 by default), used when rows carry no time.
pub fn parse(input: &str, interval_s: f64) -> Parsed<GpuReadings> {
    let input = crate::strip_ansi(input);
    let mut diagnostics = Vec::new();
    let mut out = GpuReadings::default();
    let mut columns: Vec<String> = Vec::new();
    // Where each read column sits, found once per header rather than per cell.
    const READ: [&str; 11] = [
        "gpu", "time", "sm", "mem", "pwr", "gtemp", "mclk", "pclk", "fb", "rxpci", "txpci",
    ];
    let mut at: [Option<usize>; 11] = [None; 11];
    let mut first_time: Option<f64> = None;
    let mut last_time: Option<f64> = None;
    let mut day_offset = 0.0;
    let mut round: u64 = 0;
    let mut seen_in_round: Vec<u32> = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix('#') {
            let names: Vec<String> = header.split_whitespace().map(str::to_lowercase).collect();
            // The names line has `gpu`; the units line under it has `idx`.
            if names.iter().any(|n| n == "gpu") {
                if columns.is_empty() {
                    for n in &names {
                        if !matches!(
                            n.as_str(),
                            "gpu"
                                | "date"
                                | "time"
                                | "sm"
                                | "mem"
                                | "pwr"
                                | "gtemp"
                                | "mclk"
                                | "pclk"
                                | "fb"
                                | "rxpci"
                                | "txpci"
                        ) {
                            out.other_columns.push(n.clone());
                        }
                    }
                } else if names != columns {
                    diagnostics.push(Diag::at(
                        i + 1,
                        "the column set changed mid-output: read with the new one",
                    ));
                }
                columns = names;
                for (k, name) in READ.iter().enumerate() {
                    at[k] = columns.iter().position(|c| c == name);
                }
            }
            continue;
        }
        if columns.is_empty() {
            diagnostics.push(Diag::at(
                i + 1,
                format!("a row before any `# gpu` header: {trimmed:?}"),
            ));
            continue;
        }
        // No allocation per row: dmon has at most a few dozen columns.
        let mut cells: [&str; 64] = [""; 64];
        let mut n_cells = 0;
        for word in trimmed.split_ascii_whitespace() {
            if n_cells < cells.len() {
                cells[n_cells] = word;
            }
            n_cells += 1;
        }
        if n_cells != columns.len() {
            diagnostics.push(Diag::at(
                i + 1,
                format!(
                    "{} cells where the header has {} columns: {trimmed:?}",
                    cells.len(),
                    columns.len()
                ),
            ));
            continue;
        }
        // k indexes READ.
        let cell = |k: usize| -> Option<&str> { Some(cells[at[k]?]).filter(|v| *v != "-") };
        let num = |k: usize| cell(k).and_then(|v| v.parse::<f64>().ok());
        let Some(gpu) = cell(0).and_then(|v| v.parse::<u32>().ok()) else {
            diagnostics.push(Diag::at(i + 1, format!("no GPU index: {trimmed:?}")));
            continue;
        };
        let t_s = match cell(1).and_then(clock_s) {
            Some(now) => {
                if let Some(prev) = last_time {
                    if now + day_offset < prev - 43_200.0 {
                        day_offset += 86_400.0; // past midnight
                    }
                }
                let now = now + day_offset;
                last_time = Some(now);
                now - *first_time.get_or_insert(now)
            }
            None => {
                if seen_in_round.contains(&gpu) {
                    round += 1;
                    seen_in_round.clear();
                }
                seen_in_round.push(gpu);
                round as f64 * interval_s
            }
        };
        out.samples.push(GpuSample {
            t_s,
            gpu,
            sm_util_percent: num(2),
            mem_util_percent: num(3),
            mem_used_bytes: num(8).map(|mb| (mb * MIB) as u64),
            mem_total_bytes: None,
            pcie_tx_bytes_per_s: num(10).map(|mb| mb * MIB),
            pcie_rx_bytes_per_s: num(9).map(|mb| mb * MIB),
            nvlink_tx_bytes_per_s: None,
            nvlink_rx_bytes_per_s: None,
            power_w: num(4),
            sm_clock_mhz: num(7),
            mem_clock_mhz: num(6),
            temperature_c: num(5),
        });
    }
    if columns.is_empty() {
        diagnostics.push(Diag::general(
            "no `# gpu` header: not nvidia-smi dmon output",
        ));
    } else if out.samples.is_empty() {
        diagnostics.push(Diag::general(
            "a header but no rows: dmon ended before its first interval",
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
    fn memory_pcie_and_time_columns() {
        // The column set of `nvidia-smi dmon -s umt -o T` (layout as in dmon's help).
        let text = "#Time        gpu    sm   mem   enc   dec   jpg   ofa    fb  bar1  ccpm  rxpci  txpci\n\
                    #HH:MM:SS    Idx     %     %     %     %     %     %    MB    MB    MB   MB/s   MB/s\n\
                     23:59:59      0    90    40     0     0     0     0  9000     4     0    100     20\n\
                     23:59:59      1     -    41     0     0     0     0  9001     4     0    101     21\n\
                     00:00:01      0    92    42     0     0     0     0  9002     4     0    102     22\n";
        let p = parse(text, 1.0);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let s = &p.value.samples;
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].sm_util_percent, None);
        assert_eq!(s[2].t_s, 2.0, "across midnight");
        assert_eq!(s[0].mem_used_bytes, Some(9000 * 1024 * 1024));
        assert_eq!(s[2].pcie_rx_bytes_per_s, Some(102.0 * MIB));
        assert_eq!(
            p.value.other_columns,
            ["enc", "dec", "jpg", "ofa", "bar1", "ccpm"]
        );
    }

    #[test]
    fn messy_input_is_read_as_far_as_it_goes() {
        let p = parse("    0 1 2\n# gpu sm\n# Idx %\n 0 50\n 1\n", 2.0);
        assert_eq!(p.value.samples.len(), 1);
        assert_eq!(p.diagnostics.len(), 2, "{:?}", p.diagnostics);
        assert!(!parse("garbage", 1.0).diagnostics.is_empty());
    }
}
