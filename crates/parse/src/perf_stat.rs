//! `perf stat -x,`: one CSV line per counter — value, unit, event, run time (ns), percent
//! running, then perf's derived metric and its unit. `<not supported>` and `<not counted>`
//! stand in for the value; `#` lines are comments. A counter that appears again adds to its
//! first row (values and run times summed; the metric is the first row's).

use crate::Format;
use system_profile_model::metrics::{PerfCounter, PerfStat};
use system_profile_model::{Diag, Parsed};

pub struct PerfStatCsv;

impl Format for PerfStatCsv {
    const NAME: &'static str = "perf_stat";
    type Output = PerfStat;
    fn parse(input: &str) -> Parsed<PerfStat> {
        parse(input)
    }
}

fn non_empty(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

pub fn parse(input: &str) -> Parsed<PerfStat> {
    let mut out = PerfStat::default();
    let mut diagnostics = Vec::new();
    for (i, raw) in input.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // At most ten fields; a fixed array keeps the per-line cost free of allocations.
        let mut fields = [""; 10];
        let mut n = 0;
        for part in line.split(',') {
            if n < fields.len() {
                fields[n] = part;
                n += 1;
            }
        }
        let mut f: &[&str] = &fields[..n];
        let is_value = |v: &str| v.trim().parse::<f64>().is_ok() || v.trim().starts_with("<not ");
        // --per-thread / --per-cpu / -A put the thread or CPU first.
        let scope = if f.len() > 3 && !is_value(f[0]) && is_value(f[1]) {
            let s = f[0].trim().to_string();
            f = &f[1..];
            Some(s)
        } else {
            None
        };
        // -r N adds the variance (`19.25%`) after the event.
        let variance_shift: [&str; 10];
        if f.len() > 4 && f[3].trim().ends_with('%') {
            let mut v = [""; 10];
            v[..3].copy_from_slice(&f[..3]);
            v[3..f.len() - 1].copy_from_slice(&f[4..]);
            variance_shift = v;
            f = &variance_shift[..f.len() - 1];
        }
        if f.len() < 3 {
            diagnostics.push(Diag::at(
                i + 1,
                format!("not a perf stat CSV line: {line:?}"),
            ));
            continue;
        }
        let event = f[2].trim();
        if event.is_empty() {
            diagnostics.push(Diag::at(i + 1, "a counter without an event name"));
            continue;
        }
        let (value, supported, counted) = match f[0].trim() {
            "<not supported>" => (None, false, false),
            "<not counted>" => (None, true, false),
            v => match v.parse::<f64>() {
                Ok(v) => (Some(v), true, true),
                Err(_) => {
                    diagnostics.push(Diag::at(
                        i + 1,
                        format!("unreadable value {v:?} of {event}"),
                    ));
                    (None, true, false)
                }
            },
        };
        let run_time_ns: Option<u64> = f.get(3).and_then(|v| v.trim().parse().ok());
        // A counter seen again (interval mode, `-I`) adds to its first row, so the result
        // stays one row per counter however long the input.
        if let Some(c) = out
            .counters
            .iter_mut()
            .find(|c| c.event == event && c.scope == scope)
        {
            c.value = match (c.value, value) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
            c.run_time_ns = match (c.run_time_ns, run_time_ns) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
            c.counted |= counted;
            continue;
        }
        if !supported {
            out.unsupported.push(event.to_string());
        }
        out.counters.push(PerfCounter {
            event: event.to_string(),
            scope,
            value,
            unit: non_empty(f.get(1).copied()),
            supported,
            counted,
            run_time_ns,
            running_percent: f.get(4).and_then(|v| v.trim().parse().ok()),
            metric_value: f.get(5).and_then(|v| v.trim().parse().ok()),
            metric_unit: non_empty(f.get(6).copied()),
        });
    }
    let value_of = |name: &str| {
        out.counters
            .iter()
            .find(|c| c.event == name || c.event.starts_with(&format!("{name}:")))
            .and_then(|c| c.value)
    };
    if let (Some(ins), Some(cyc)) = (value_of("instructions"), value_of("cycles")) {
        if cyc > 0.0 {
            out.ipc = Some(ins / cyc);
        }
    }
    // perf divides task-clock by the wall time it alone knows, and prints it as a metric; the
    // counter's run time is the task-clock itself, not the wall time.
    out.cpus_utilized = out
        .counters
        .iter()
        .filter(|c| c.scope.is_none())
        .find(|c| c.event.starts_with("task-clock") || c.event.starts_with("cpu-clock"))
        .filter(|c| c.metric_unit.as_deref() == Some("CPUs utilized"))
        .and_then(|c| c.metric_value);
    Parsed {
        value: out,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_counters_give_ipc_and_the_layout_variants_are_read() {
        // perf's documented -x, layout with hardware counters (value, unit, event, run time,
        // % running, metric, metric unit), with -r's variance column and a per-thread prefix.
        let text = "# started on a machine with a PMU\n\n\
                    2000.00,msec,task-clock,2000000000,100.00,0.950,CPUs utilized\n\
                    8000000000,,cycles,2000000000,100.00,4.000,GHz\n\
                    12000000000,,instructions,1.50%,2000000000,100.00,1.50,insn per cycle\n\
                    app-42,5,,context-switches,2000000000,100.00,2.500,/sec\n";
        let p = parse(text);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        assert_eq!(p.value.counters.len(), 4);
        assert_eq!(p.value.ipc, Some(1.5));
        assert_eq!(p.value.cpus_utilized, Some(0.95));
        let ins = &p.value.counters[2];
        assert_eq!(
            (ins.run_time_ns, ins.metric_value),
            (Some(2_000_000_000), Some(1.5))
        );
        let cs = &p.value.counters[3];
        assert_eq!(cs.scope.as_deref(), Some("app-42"));
        assert_eq!(cs.value, Some(5.0));
        let bad = parse("garbage\n,,\n");
        assert_eq!(bad.diagnostics.len(), 2);
    }
}
