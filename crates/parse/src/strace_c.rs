//! `strace -c`: a table of syscalls (`% time`, `seconds`, `usecs/call`, `calls`, `errors`,
//! `syscall`) between dashed rules, then a `total` row.

use crate::Format;
use system_profile_model::metrics::{SyscallRow, SyscallSummary};
use system_profile_model::{Diag, Parsed};

pub struct StraceSummary;

impl Format for StraceSummary {
    const NAME: &'static str = "strace_c";
    type Output = SyscallSummary;
    fn parse(input: &str) -> Parsed<SyscallSummary> {
        parse(input)
    }
}

pub fn parse(input: &str) -> Parsed<SyscallSummary> {
    let mut out = SyscallSummary::default();
    let mut diagnostics = Vec::new();
    let mut header = false;
    let mut total = false;
    for (i, raw) in input.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with("% time") {
            header = true;
            continue;
        }
        if !header || line.is_empty() || line.starts_with("---") {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        // errors is blank when zero: 5 fields, else 6.
        let (errors, name) = match f.len() {
            5 => (Some(0), f[4]),
            6 => (f[4].parse().ok(), f[5]),
            _ => {
                diagnostics.push(Diag::at(i + 1, format!("not a syscall row: {line:?}")));
                continue;
            }
        };
        let (Some(time_percent), Some(seconds), Some(calls), Some(errors)) = (
            f[0].parse::<f64>().ok(),
            f[1].parse::<f64>().ok(),
            f[3].parse::<u64>().ok(),
            errors,
        ) else {
            diagnostics.push(Diag::at(i + 1, format!("unreadable syscall row: {line:?}")));
            continue;
        };
        if name == "total" {
            out.total_seconds = seconds;
            out.total_calls = calls;
            out.total_errors = errors;
            total = true;
            continue;
        }
        out.rows.push(SyscallRow {
            syscall: name.to_string(),
            time_percent,
            seconds,
            usecs_per_call: f[2].parse().ok(),
            calls,
            errors,
        });
    }
    if !header {
        diagnostics.push(Diag::general(
            "no syscall table: the traced process made no syscalls, or this is not strace -c output",
        ));
    } else if !total {
        diagnostics.push(Diag::general("no total row: the table may be cut short"));
        out.total_calls = out.rows.iter().map(|r| r.calls).sum();
        out.total_errors = out.rows.iter().map(|r| r.errors).sum();
        out.total_seconds = out.rows.iter().map(|r| r.seconds).sum();
    }
    Parsed {
        value: out,
        diagnostics,
    }
}
