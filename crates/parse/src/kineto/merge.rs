//! Several ranks' traces written as one Chrome trace on one clock: each rank's events shifted
//! by its clock's offset (`align_clocks`), its processes renumbered and labelled with the rank
//! (two ranks' `pid 0` are different GPUs), its flow and async ids kept apart. Streams: one
//! event in memory at a time, whatever the traces' sizes.

use super::scanner::{self, Scanner};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{Read, Write};
use system_profile_model::trace::{ClockAlignment, TraceFile};

/// One rank's trace to merge.
pub struct MergeInput<R> {
    pub reader: R,
    /// Subtracted from its timestamps, µs.
    pub offset_us: f64,
    /// How its processes are named in the merged timeline (`rank 1`, `rank 1 (node 1)`).
    pub label: String,
    /// Orders the ranks' process groups.
    pub rank: u32,
}

/// What the merge wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergeStats {
    pub events: u64,
    /// Elements of `traceEvents` that were not objects, and traces that stopped being JSON
    /// (what came before them is kept).
    pub skipped: u64,
    pub diagnostics: Vec<String>,
}

/// The inputs for the traces that `alignment` put on its clock, with their readers (in the
/// traces' order); a trace with no offset is left out, and said.
pub fn merge_inputs<R>(
    readers: Vec<R>,
    traces: &[TraceFile],
    alignment: &ClockAlignment,
) -> (Vec<MergeInput<R>>, Vec<String>) {
    let mut left_out = Vec::new();
    let inputs = readers
        .into_iter()
        .zip(traces.iter().zip(&alignment.ranks))
        .filter_map(|(reader, (t, clock))| {
            let Some(offset_us) = clock.offset_us else {
                left_out.push(format!(
                    "rank {} ({}) is not in the merged trace: {}",
                    clock.rank,
                    t.path,
                    clock.note.as_deref().unwrap_or("its clock is unknown")
                ));
                return None;
            };
            let label = match t.node_rank {
                Some(node) => format!("rank {} (node {node})", clock.rank),
                None => format!("rank {}", clock.rank),
            };
            Some(MergeInput {
                reader,
                offset_us,
                label,
                rank: clock.rank,
            })
        })
        .collect();
    (inputs, left_out)
}

/// `readers` (the traces' files, in `traces`' order) merged onto `alignment`'s clock and
/// gzipped into `out`; what was left out or cut, said.
pub fn write_merged_gzip<R: Read, W: Write>(
    readers: Vec<R>,
    traces: &[TraceFile],
    alignment: &ClockAlignment,
    out: W,
) -> std::io::Result<Vec<String>> {
    let (inputs, mut notes) = merge_inputs(readers, traces, alignment);
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
    let stats = write_merged(inputs, alignment, &mut gz)?;
    gz.finish()?.flush()?;
    notes.extend(stats.diagnostics);
    Ok(notes)
}

/// Each rank's ids (flows, async spans) moved into their own range: 2^40 apart.
const ID_STRIDE: u64 = 1 << 40;

/// Write `inputs` (each gzip or plain JSON) as one trace to `out`, `alignment` kept in its
/// `systemProfileAlignment` key.
pub fn write_merged<R: Read, W: Write>(
    inputs: Vec<MergeInput<R>>,
    alignment: &ClockAlignment,
    out: &mut W,
) -> std::io::Result<MergeStats> {
    let mut stats = MergeStats::default();
    out.write_all(b"{\"traceEvents\":[")?;
    let mut first = true;
    let mut pids: HashMap<(u32, String), u64> = HashMap::new();
    for input in inputs {
        let mut sc = Scanner::new(super::decompressed(input.reader)?);
        let mut failed: Option<std::io::Error> = None;
        let mut emit = |v: &Value, out: &mut W| -> std::io::Result<()> {
            if !std::mem::take(&mut first) {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, v).map_err(std::io::Error::other)
        };
        let walked = scanner::walk(
            &mut sc,
            |bytes| {
                if failed.is_some() {
                    return;
                }
                let Ok(Value::Object(mut ev)) = serde_json::from_slice::<Value>(bytes) else {
                    stats.skipped += 1;
                    return;
                };
                let pid_key = ev.get("pid").map_or_else(String::new, Value::to_string);
                let next = pids.len() as u64 + 1;
                let pid = *pids
                    .entry((input.rank, pid_key.clone()))
                    .or_insert_with(|| {
                        let labels = json!({"ph": "M", "name": "process_labels", "pid": next,
                        "args": {"labels": input.label}});
                        let order = json!({"ph": "M", "name": "process_sort_index", "pid": next,
                        "args": {"sort_index": u64::from(input.rank) * 1000 + next}});
                        for v in [&labels, &order] {
                            if let Err(e) = emit(v, out) {
                                failed = Some(e);
                            }
                        }
                        next
                    });
                let meta = ev.get("ph").and_then(Value::as_str) == Some("M");
                let name = ev.get("name").and_then(Value::as_str).unwrap_or("");
                if meta && name == "process_sort_index" {
                    return;
                }
                if meta && name == "process_name" {
                    if let Some(Value::String(n)) =
                        ev.get_mut("args").and_then(|a| a.get_mut("name"))
                    {
                        *n = format!("{}: {n}", input.label);
                    }
                }
                ev.insert("pid".into(), pid.into());
                if let Some(ts) = ev.get("ts").and_then(Value::as_f64) {
                    ev.insert("ts".into(), json!(ts - input.offset_us));
                }
                for key in ["id", "bind_id"] {
                    match ev.get(key) {
                        Some(Value::Number(n)) if n.as_u64().is_some() => {
                            let id = n.as_u64().unwrap_or_default();
                            ev.insert(key.into(), json!(u64::from(input.rank) * ID_STRIDE + id));
                        }
                        Some(Value::String(s)) => {
                            let s = format!("r{}:{s}", input.rank);
                            ev.insert(key.into(), s.into());
                        }
                        _ => {}
                    }
                }
                stats.events += 1;
                if let Err(e) = emit(&Value::Object(ev), out) {
                    failed = Some(e);
                }
            },
            |_, _| {},
        );
        if let Some(e) = failed {
            return Err(e);
        }
        if let Err(e) = walked {
            stats.skipped += 1;
            stats.diagnostics.push(format!(
                "{}'s trace stops being JSON at byte {} ({}): its events before that are merged",
                input.label, e.offset, e.message
            ));
        }
    }
    out.write_all(b"],\"displayTimeUnit\":\"ms\",\"systemProfileAlignment\":")?;
    serde_json::to_writer(&mut *out, alignment).map_err(std::io::Error::other)?;
    out.write_all(b"}")?;
    out.flush()?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_shifted_renumbered_and_labelled() {
        let r0 = r#"{"traceEvents":[{"ph":"M","name":"process_name","pid":0,"args":{"name":"GPU 0"}},
            {"ph":"X","name":"k","pid":0,"tid":7,"ts":100.5,"dur":2},{"ph":"s","id":3,"pid":0,"ts":101}]}"#;
        let r1 = r#"{"traceEvents":[{"ph":"X","name":"k","pid":0,"tid":7,"ts":5000100,"dur":2},
            "junk",{"ph":"s","id":3,"pid":0,"ts":5000101}]}"#;
        let alignment = ClockAlignment {
            reference_rank: 0,
            ranks: Vec::new(),
            merged_trace: None,
        };
        let inputs = vec![
            MergeInput {
                reader: r0.as_bytes(),
                offset_us: 0.0,
                label: "rank 0".into(),
                rank: 0,
            },
            MergeInput {
                reader: r1.as_bytes(),
                offset_us: 5e6,
                label: "rank 1 (node 1)".into(),
                rank: 1,
            },
        ];
        let mut out = Vec::new();
        let stats = write_merged(inputs, &alignment, &mut out).unwrap();
        assert_eq!((stats.events, stats.skipped), (5, 1));
        let v: Value = serde_json::from_slice(&out).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        let ks: Vec<&Value> = events.iter().filter(|e| e["name"] == "k").collect();
        assert_eq!(ks[0]["ts"], 100.5);
        assert_eq!(ks[1]["ts"], 100.0);
        assert_ne!(ks[0]["pid"], ks[1]["pid"], "two ranks' pid 0 stay apart");
        let flows: Vec<&Value> = events.iter().filter(|e| e["ph"] == "s").collect();
        assert_ne!(flows[0]["id"], flows[1]["id"]);
        assert!(events
            .iter()
            .any(|e| e["name"] == "process_name" && e["args"]["name"] == "rank 0: GPU 0"));
        assert!(events
            .iter()
            .any(|e| e["args"]["labels"] == "rank 1 (node 1)"));
        assert_eq!(v["systemProfileAlignment"]["reference_rank"], 0);
    }
}
