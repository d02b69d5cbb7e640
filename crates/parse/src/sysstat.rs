//! Interval reports of procps and sysstat: `vmstat -n -w -t` (text), `iostat -d -x -y -o JSON`,
//! `mpstat -P ALL -o JSON` and `pidstat -h` (text, run with LC_ALL=C for 24-hour times).
//! Every numeric column is kept under the tool's own name and summarised per entity.

use std::collections::BTreeMap;
use system_profile_model::metrics::{ColumnStats, Series, SysstatReport};
use system_profile_model::{Diag, Parsed};

/// Samples per entity, in the order entities first appear.
#[derive(Default)]
struct Collector {
    order: Vec<String>,
    values: BTreeMap<String, BTreeMap<String, Vec<f64>>>,
    samples: BTreeMap<String, u64>,
}

impl Collector {
    fn add(&mut self, entity: &str, row: impl IntoIterator<Item = (String, f64)>) {
        if !self.values.contains_key(entity) {
            self.order.push(entity.to_string());
        }
        let cols = self.values.entry(entity.to_string()).or_default();
        for (k, v) in row {
            cols.entry(k).or_default().push(v);
        }
        *self.samples.entry(entity.to_string()).or_default() += 1;
    }

    fn report(mut self, tool: &str) -> SysstatReport {
        let series = self
            .order
            .iter()
            .map(|e| Series {
                entity: e.clone(),
                samples: self.samples.get(e).copied().unwrap_or(0),
                columns: self
                    .values
                    .remove(e)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(_, v)| !v.is_empty())
                    .map(|(k, v)| {
                        let n = v.len() as f64;
                        let stats = ColumnStats {
                            mean: v.iter().sum::<f64>() / n,
                            min: v.iter().copied().fold(f64::INFINITY, f64::min),
                            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                            last: *v.last().unwrap_or(&0.0),
                        };
                        (k, stats)
                    })
                    .collect(),
            })
            .collect();
        SysstatReport {
            tool: tool.to_string(),
            series,
        }
    }
}

/// `vmstat -n -w -t INTERVAL COUNT`: a group header, the column header, then one row per
/// interval. The first row averages since boot and is left out.
pub fn vmstat(input: &str) -> Parsed<SysstatReport> {
    let mut diagnostics = Vec::new();
    let mut header: Option<Vec<String>> = None;
    let mut c = Collector::default();
    let mut first = true;
    for (i, line) in input.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.first() == Some(&"r") {
            header = Some(f.iter().map(|s| s.to_string()).collect());
            continue;
        }
        let Some(h) = &header else { continue };
        if f.is_empty() || f[0].starts_with('-') {
            continue;
        }
        let numbers: Vec<Option<f64>> = f.iter().map(|v| v.parse().ok()).collect();
        let n = numbers.iter().take_while(|v| v.is_some()).count();
        if n < 10 {
            diagnostics.push(Diag::at(i + 1, format!("not a vmstat row: {line:?}")));
            continue;
        }
        if first {
            first = false;
            continue;
        }
        c.add(
            "machine",
            h.iter()
                .zip(numbers.iter().take(n))
                .filter_map(|(k, v)| v.map(|v| (k.clone(), v))),
        );
    }
    if header.is_none() {
        diagnostics.push(Diag::general("no vmstat header (`r b swpd ...`)"));
    }
    Parsed {
        value: c.report("vmstat"),
        diagnostics,
    }
}

fn numeric_fields(
    obj: &serde_json::Map<String, serde_json::Value>,
    skip: &str,
) -> Vec<(String, f64)> {
    obj.iter()
        .filter(|(k, _)| k.as_str() != skip)
        .filter_map(|(k, v)| v.as_f64().map(|v| (k.clone(), v)))
        .collect()
}

/// sysstat's `-o JSON`: `sysstat.hosts[0].statistics[]`, each with a list under `list` whose
/// items name their entity under `key`.
fn sysstat_json(input: &str, tool: &str, list: &str, key: &str) -> Parsed<SysstatReport> {
    let mut diagnostics = Vec::new();
    let mut c = Collector::default();
    let v: serde_json::Value = match serde_json::from_str(input.trim()) {
        Ok(v) => v,
        Err(e) => {
            return Parsed {
                value: c.report(tool),
                diagnostics: vec![Diag::general(format!("not {tool} JSON: {e}"))],
            }
        }
    };
    let stats = v["sysstat"]["hosts"][0]["statistics"].as_array();
    let Some(stats) = stats else {
        diagnostics.push(Diag::general(format!(
            "no sysstat.hosts[0].statistics in the {tool} JSON"
        )));
        return Parsed {
            value: c.report(tool),
            diagnostics,
        };
    };
    for s in stats {
        for item in s[list].as_array().into_iter().flatten() {
            let Some(obj) = item.as_object() else {
                continue;
            };
            let entity = obj
                .get(key)
                .map(|e| {
                    e.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| e.to_string())
                })
                .unwrap_or_default();
            c.add(&entity, numeric_fields(obj, key));
        }
    }
    Parsed {
        value: c.report(tool),
        diagnostics,
    }
}

/// `iostat -d -x -y -o JSON INTERVAL COUNT`: one series per disk.
pub fn iostat(input: &str) -> Parsed<SysstatReport> {
    sysstat_json(input, "iostat", "disk", "disk_device")
}

/// `mpstat -P ALL -o JSON INTERVAL COUNT`: one series per CPU and one for `all`.
pub fn mpstat(input: &str) -> Parsed<SysstatReport> {
    sysstat_json(input, "mpstat", "cpu-load", "cpu")
}

/// `pidstat -h ...`: a `# Time UID PID ...` header before each group of rows; one series per
/// process, named by PID and command.
pub fn pidstat(input: &str) -> Parsed<SysstatReport> {
    let mut diagnostics = Vec::new();
    let mut header: Option<Vec<String>> = None;
    let mut c = Collector::default();
    for (i, line) in input.lines().enumerate() {
        if let Some(rest) = line.strip_prefix('#') {
            header = Some(rest.split_whitespace().map(str::to_string).collect());
            continue;
        }
        let Some(h) = &header else { continue };
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() != h.len() {
            diagnostics.push(Diag::at(
                i + 1,
                format!("{} fields under a {}-column header", f.len(), h.len()),
            ));
            continue;
        }
        let col = |name: &str| h.iter().position(|c| c == name).map(|p| f[p]);
        let entity = format!(
            "pid {} {}",
            col("PID").unwrap_or("?"),
            col("Command").unwrap_or("")
        );
        c.add(
            entity.trim(),
            h.iter()
                .zip(&f)
                .filter(|(k, _)| !matches!(k.as_str(), "Time" | "UID" | "PID" | "CPU" | "Command"))
                .filter_map(|(k, v)| v.parse::<f64>().ok().map(|v| (k.clone(), v))),
        );
    }
    if header.is_none() && !input.trim().is_empty() {
        diagnostics.push(Diag::general("no pidstat header (`# Time UID PID ...`)"));
    }
    Parsed {
        value: c.report("pidstat"),
        diagnostics,
    }
}
