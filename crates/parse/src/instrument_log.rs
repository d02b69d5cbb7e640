//! The instrumentation log (`profile_output/instrument/measure.jsonl`, written by the runtime
//! helper that `instrument_file` installs): one JSON record per line, read into
//! `InstrumentRecord` and summed up per site, copy direction and collective. Lines that are
//! not records (a crash mid-write leaves at most a torn last line) become diagnostics.

use crate::Format;
use std::collections::HashMap;
use system_profile_model::instrument::{
    CollectiveSummary, InstrumentRecord, InstrumentSummary, MemoryMark, MemoryPeaks, SiteSummary,
    TransferSummary, MEMORY_MARKS_KEPT,
};
use system_profile_model::{Diag, Parsed};

pub struct InstrumentLog;

impl Format for InstrumentLog {
    const NAME: &'static str = "instrument_log";
    type Output = InstrumentSummary;
    fn parse(input: &str) -> Parsed<InstrumentSummary> {
        parse(input)
    }
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().fold(0.0, |a, b| a + b) / v.len() as f64)
}

#[derive(Default)]
struct Site {
    measure: Option<system_profile_model::instrument::Measure>,
    calls: u64,
    wall: Vec<f64>,
    cpu: Vec<f64>,
    gpu: Vec<f64>,
}

/// Rows keyed by name, kept in the order their keys first appear.
struct Ordered<K, V> {
    index: HashMap<K, usize>,
    rows: Vec<(K, V)>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Default> Ordered<K, V> {
    fn new() -> Self {
        Ordered {
            index: HashMap::new(),
            rows: Vec::new(),
        }
    }

    fn get(&mut self, key: K) -> &mut V {
        let rows = &mut self.rows;
        let at = *self.index.entry(key.clone()).or_insert_with(|| {
            rows.push((key, V::default()));
            rows.len() - 1
        });
        &mut self.rows[at].1
    }
}

#[derive(Default)]
struct Copies {
    count: u64,
    bytes: u64,
    pinned: u64,
    time_s: f64,
}

#[derive(Default)]
struct Calls {
    world_size: u32,
    /// (bytes, latency, algbw, busbw) per call.
    calls: Vec<(u64, f64, f64, f64)>,
}

pub fn parse(input: &str) -> Parsed<InstrumentSummary> {
    let mut diagnostics = Vec::new();
    let mut out = InstrumentSummary::default();
    let mut sites: Ordered<(String, String), Site> = Ordered::new();
    let mut copies: Ordered<String, Copies> = Ordered::new();
    let mut collectives: Ordered<(String, String), Calls> = Ordered::new();
    let mut memory: Option<MemoryPeaks> = None;
    for (i, line) in input.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: InstrumentRecord = match serde_json::from_str(line) {
            Ok(r) => r,
            Err(e) => {
                diagnostics.push(Diag::at(i + 1, format!("not a record: {e}")));
                continue;
            }
        };
        match record {
            InstrumentRecord::Meta(m) => {
                out.processes += 1;
                if let Some(rss) = m.rss_bytes {
                    out.rss_at_load_bytes = Some(out.rss_at_load_bytes.map_or(rss, |r| r.min(rss)));
                }
            }
            InstrumentRecord::Timing(t) => {
                let s = sites.get((t.change, t.site));
                s.wall.push(t.wall_s);
                s.cpu.push(t.cpu_s);
            }
            InstrumentRecord::CudaTime(c) => sites.get((c.change, c.site)).gpu.push(c.gpu_s),
            InstrumentRecord::Summary(s) => {
                let site = sites.get((s.change, s.site));
                site.calls += s.calls;
                site.measure = Some(s.measure);
            }
            InstrumentRecord::Transfer(t) => {
                let c = copies.get(t.direction);
                c.count += t.count;
                c.bytes += t.bytes;
                c.pinned += t.pinned_count;
                c.time_s += t.time_s;
            }
            InstrumentRecord::Collective(c) => {
                let calls = collectives.get((c.op, c.backend));
                calls.world_size = calls.world_size.max(c.world_size);
                calls
                    .calls
                    .push((c.bytes, c.latency_s, c.algbw_gbps, c.busbw_gbps));
            }
            InstrumentRecord::Memory(m) => {
                if out.memory_marks.len() < MEMORY_MARKS_KEPT {
                    out.memory_marks.push(MemoryMark {
                        t: m.t,
                        pid: m.pid,
                        site: m.site.clone(),
                        call: m.call,
                        point: m.point.clone(),
                        rss_bytes: m.rss_bytes,
                        gpu_allocated_bytes: (!m.devices.is_empty())
                            .then(|| m.devices.iter().map(|d| d.allocated_bytes).sum()),
                    });
                } else {
                    out.memory_marks_left_out += 1;
                }
                let peaks = memory.get_or_insert_with(|| MemoryPeaks {
                    rss_bytes_max: 0,
                    devices: Vec::new(),
                });
                peaks.rss_bytes_max = peaks.rss_bytes_max.max(m.rss_bytes);
                for d in m.devices {
                    match peaks.devices.iter_mut().find(|p| p.device == d.device) {
                        Some(p) => {
                            p.allocated_bytes = p.allocated_bytes.max(d.allocated_bytes);
                            p.reserved_bytes = p.reserved_bytes.max(d.reserved_bytes);
                            p.peak_allocated_bytes =
                                p.peak_allocated_bytes.max(d.peak_allocated_bytes);
                        }
                        None => peaks.devices.push(d),
                    }
                }
            }
            InstrumentRecord::Duplicates(d) => {
                if out
                    .duplicates
                    .as_ref()
                    .is_none_or(|best| d.bytes_duplicated > best.bytes_duplicated)
                {
                    out.duplicates = Some(d);
                }
            }
            InstrumentRecord::Note(n) => {
                if !out.notes.contains(&n.message) {
                    out.notes.push(n.message);
                }
            }
        }
    }
    for ((change, site), s) in sites.rows {
        let wall = sorted(s.wall);
        let wall_mean = mean(&wall);
        out.sites.push(SiteSummary {
            change,
            site,
            measure: s.measure,
            calls: s.calls,
            timed: wall.len() as u64,
            wall_s_mean: wall_mean,
            wall_s_p50: pct(&wall, 50.0),
            wall_s_p95: pct(&wall, 95.0),
            cpu_s_mean: mean(&s.cpu),
            wall_s_total_est: wall_mean.map(|m| m * s.calls.max(wall.len() as u64) as f64),
            gpu_s_mean: mean(&s.gpu),
        });
    }
    for (direction, c) in copies.rows {
        out.transfers.push(TransferSummary {
            direction,
            count: c.count,
            bytes: c.bytes,
            bytes_per_copy_mean: if c.count > 0 {
                c.bytes as f64 / c.count as f64
            } else {
                0.0
            },
            pinned_count: c.pinned,
            time_s: c.time_s,
            bandwidth_gbps: if c.time_s > 0.0 {
                c.bytes as f64 / c.time_s / 1e9
            } else {
                0.0
            },
        });
    }
    for ((op, backend), c) in collectives.rows {
        let col = |k: usize| -> Vec<f64> {
            sorted(
                c.calls
                    .iter()
                    .map(|r| match k {
                        0 => r.0 as f64,
                        1 => r.1,
                        2 => r.2,
                        _ => r.3,
                    })
                    .collect(),
            )
        };
        let (bytes, latency, alg, bus) = (col(0), col(1), col(2), col(3));
        out.collectives.push(CollectiveSummary {
            op,
            backend,
            world_size: c.world_size,
            count: c.calls.len() as u64,
            bytes_total: c.calls.iter().map(|r| r.0).sum(),
            bytes_p50: pct(&bytes, 50.0).unwrap_or(0.0) as u64,
            latency_s_p50: pct(&latency, 50.0).unwrap_or(0.0),
            latency_s_p95: pct(&latency, 95.0).unwrap_or(0.0),
            algbw_gbps_p50: pct(&alg, 50.0).unwrap_or(0.0),
            busbw_gbps_p50: pct(&bus, 50.0).unwrap_or(0.0),
        });
    }
    out.memory = memory;
    Parsed {
        value: out,
        diagnostics,
    }
}
