//! `/usr/bin/time -v` (GNU time): one `key: value` line per measure, tab-indented, after
//! whatever the command itself wrote when both share stderr.

use crate::Format;
use system_profile_model::metrics::TimeV;
use system_profile_model::{Diag, Parsed};

pub struct TimeVerbose;

impl Format for TimeVerbose {
    const NAME: &'static str = "time_v";
    type Output = TimeV;
    fn parse(input: &str) -> Parsed<TimeV> {
        parse(input)
    }
}

/// `h:mm:ss`, `m:ss` or `m:ss.ss` as seconds.
pub fn parse_elapsed(text: &str) -> Option<f64> {
    let parts: Vec<&str> = text.trim().split(':').collect();
    let mut seconds = 0.0;
    for p in &parts {
        seconds = seconds * 60.0 + p.parse::<f64>().ok()?;
    }
    (parts.len() >= 2).then_some(seconds)
}

pub fn parse(input: &str) -> Parsed<TimeV> {
    let mut t = TimeV::default();
    let mut diagnostics = Vec::new();
    let mut seen_wall = false;
    for (i, raw) in input.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("Command terminated by signal ") {
            t.terminated_by_signal = rest.trim().parse().ok();
            continue;
        }
        if line.starts_with("Command exited with non-zero status") {
            continue;
        }
        // Only tab-indented lines are time's; the command's own stderr may precede them.
        if !raw.starts_with('\t') {
            continue;
        }
        let Some((key, value)) = line.rsplit_once(": ") else {
            continue;
        };
        let value = value.trim();
        let int = || value.parse::<u64>().ok();
        let float = || value.parse::<f64>().ok();
        let ok = match key {
            "Command being timed" => {
                t.command = Some(value.trim_matches('"').to_string());
                true
            }
            "User time (seconds)" => float().map(|v| t.user_s = v).is_some(),
            "System time (seconds)" => float().map(|v| t.sys_s = v).is_some(),
            "Percent of CPU this job got" => {
                // "?" when the wall time is zero.
                t.cpu_percent = value.trim_end_matches('%').parse().ok();
                true
            }
            k if k.starts_with("Elapsed (wall clock) time") => {
                seen_wall = true;
                parse_elapsed(value).map(|v| t.wall_s = v).is_some()
            }
            "Maximum resident set size (kbytes)" => {
                int().map(|v| t.max_rss_bytes = v * 1024).is_some()
            }
            "Major (requiring I/O) page faults" => int().map(|v| t.major_faults = v).is_some(),
            "Minor (reclaiming a frame) page faults" => int().map(|v| t.minor_faults = v).is_some(),
            "Voluntary context switches" => int().map(|v| t.voluntary_ctx_switches = v).is_some(),
            "Involuntary context switches" => {
                int().map(|v| t.involuntary_ctx_switches = v).is_some()
            }
            "Swaps" => int().map(|v| t.swaps = v).is_some(),
            "File system inputs" => int().map(|v| t.fs_inputs = v).is_some(),
            "File system outputs" => int().map(|v| t.fs_outputs = v).is_some(),
            "Signals delivered" => int().map(|v| t.signals_delivered = v).is_some(),
            "Page size (bytes)" => int().map(|v| t.page_size_bytes = Some(v)).is_some(),
            "Exit status" => value.parse().map(|v| t.exit_status = Some(v)).is_ok(),
            // Measures GNU time prints as 0 on Linux (the kernel does not keep them).
            _ => true,
        };
        if !ok {
            diagnostics.push(Diag::at(
                line_no,
                format!("unreadable value for `{key}`: {value:?}"),
            ));
        }
    }
    if !seen_wall {
        diagnostics.push(Diag::general(
            "no `Elapsed (wall clock) time` line: not time -v output",
        ));
    }
    if t.terminated_by_signal.is_some() {
        // time prints the status of a signalled child as 0; it did not exit.
        t.exit_status = None;
    }
    t.set_utilization();
    Parsed {
        value: t,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_forms() {
        assert_eq!(parse_elapsed("0:00.63"), Some(0.63));
        assert_eq!(parse_elapsed("1:02.5"), Some(62.5));
        assert_eq!(parse_elapsed("2:03:04"), Some(7384.0));
        assert_eq!(parse_elapsed("12"), None);
        assert_eq!(parse_elapsed("a:b"), None);
    }

    #[test]
    fn messy_input_is_diagnosed_not_fatal() {
        let p = parse("hello from the program\n\tUser time (seconds): x\n");
        assert_eq!(p.value.user_s, 0.0);
        assert_eq!(p.diagnostics.len(), 2, "{:?}", p.diagnostics);
        assert!(parse("").diagnostics[0].message.contains("not time -v"));
    }
}
