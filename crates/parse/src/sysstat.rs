//! Interval reports of procps and sysstat: `vmstat -n -w -t` (text), `iostat -d -x -y -o JSON`,
//! `mpstat -P ALL -o JSON` and `pidstat -h` (text, run with LC_ALL=C for 24-hour times).
//! Every numeric column is kept under the tool's own name and summarised per entity.

use std::collections::BTreeMap;
use system_profile_model::metrics::{ColumnStats, Series, SysstatReport};
use system_profile_model::{Diag, Parsed};

/// Running statistics of one column: memory does not grow with the number of samples.
#[derive(Clone, Copy)]
struct Acc {
    n: u64,
    sum: f64,
    min: f64,
    max: f64,
    last: f64,
}

impl Acc {
    fn new() -> Acc {
        Acc {
            n: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            last: 0.0,
        }
    }

    fn push(&mut self, v: f64) {
        self.n += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.last = v;
    }
}

/// Statistics per entity and column, entities in the order they first appear. Lookups take
/// `&str`, so a known entity or column costs no allocation.
#[derive(Default)]
struct Collector {
    order: Vec<String>,
    entities: BTreeMap<String, (u64, BTreeMap<String, Acc>)>,
}

impl Collector {
    fn add<'a>(&mut self, entity: &str, row: impl IntoIterator<Item = (&'a str, f64)>) {
        if !self.entities.contains_key(entity) {
            self.order.push(entity.to_string());
            self.entities
                .insert(entity.to_string(), (0, BTreeMap::new()));
        }
        let Some((samples, cols)) = self.entities.get_mut(entity) else {
            return;
        };
        *samples += 1;
        for (k, v) in row {
            match cols.get_mut(k) {
                Some(acc) => acc.push(v),
                None => {
                    let mut acc = Acc::new();
                    acc.push(v);
                    cols.insert(k.to_string(), acc);
                }
            }
        }
    }

    fn report(mut self, tool: &str) -> SysstatReport {
        let series = self
            .order
            .iter()
            .filter_map(|e| {
                let (samples, cols) = self.entities.remove(e)?;
                Some(Series {
                    entity: e.clone(),
                    samples,
                    columns: cols
                        .into_iter()
                        .map(|(k, a)| {
                            (
                                k,
                                ColumnStats {
                                    mean: a.sum / a.n as f64,
                                    min: a.min,
                                    max: a.max,
                                    last: a.last,
                                },
                            )
                        })
                        .collect(),
                })
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
        // The numeric columns come first, each parsed once; the timestamp (if any) after.
        let mut values = [0.0f64; 32];
        let mut n = 0;
        for v in f.iter().take(values.len()) {
            match v.parse::<f64>() {
                Ok(x) => {
                    values[n] = x;
                    n += 1;
                }
                Err(_) => break,
            }
        }
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
                .map(String::as_str)
                .zip(values[..n].iter().copied()),
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

fn numeric_fields<'a>(
    obj: &'a serde_json::Map<String, serde_json::Value>,
    skip: &'a str,
) -> impl Iterator<Item = (&'a str, f64)> {
    obj.iter()
        .filter(move |(k, _)| k.as_str() != skip)
        .filter_map(|(k, v)| v.as_f64().map(|v| (k.as_str(), v)))
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
    let mut entity = String::new();
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
        entity.clear();
        entity.push_str("pid ");
        entity.push_str(col("PID").unwrap_or("?"));
        if let Some(cmd) = col("Command") {
            entity.push(' ');
            entity.push_str(cmd);
        }
        c.add(
            &entity,
            h.iter()
                .zip(&f)
                .filter(|(k, _)| !matches!(k.as_str(), "Time" | "UID" | "PID" | "CPU" | "Command"))
                .filter_map(|(k, v)| v.parse::<f64>().ok().map(|v| (k.as_str(), v))),
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
