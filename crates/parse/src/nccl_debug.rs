//! An `NCCL_DEBUG=INFO` log (any `NCCL_DEBUG_SUBSYS`): lines `host:pid:tid [dev] NCCL INFO
//! ...` (or `NCCL WARN`), from every rank, often interleaved with the program's own output,
//! even in the middle of a line, so each line is searched for `NCCL INFO` / `NCCL WARN` rather
//! than read from its start. Read: the version, `Using network`, communicators from
//! `ncclCommInitRankConfig ... Init COMPLETE` and `comm ... nRanks ... nNodes`, transports
//! from `Channel xx/y : a[d] -> b[d] ... via T`, ring channels and tree lines, collectives
//! from COLL lines (`AllReduce: opCount ... count N datatype D ...`: bytes = count × the
//! datatype's size), algorithm choices (`AllReduce: N Bytes -> Algo RING proto SIMPLE`), and
//! NCCL WARN messages.

use crate::Format;
use std::collections::{BTreeMap, BTreeSet};
use system_profile_model::metrics::{
    NcclAlgorithmChoice, NcclCollective, NcclCommunicator, NcclRank, NcclReport, NcclSizeCount,
    NcclTransport,
};
use system_profile_model::{Diag, Parsed};

pub struct NcclDebug;

impl Format for NcclDebug {
    const NAME: &'static str = "nccl_debug";
    type Output = NcclReport;
    fn parse(input: &str) -> Parsed<NcclReport> {
        parse(input)
    }
}

/// NCCL's `ncclDataType_t`: name and bytes per element.
fn datatype(code: u32) -> (String, Option<u64>) {
    let (name, size) = match code {
        0 => ("int8", 1),
        1 => ("uint8", 1),
        2 => ("int32", 4),
        3 => ("uint32", 4),
        4 => ("int64", 8),
        5 => ("uint64", 8),
        6 => ("float16", 2),
        7 => ("float32", 4),
        8 => ("float64", 8),
        9 => ("bfloat16", 2),
        10 => ("float8e4m3", 1),
        11 => ("float8e5m2", 1),
        _ => return (code.to_string(), None),
    };
    (name.to_string(), Some(size))
}

/// The value after `key ` among whitespace-separated words.
fn after<'a>(words: &[&'a str], key: &str) -> Option<&'a str> {
    words
        .iter()
        .position(|w| *w == key)
        .and_then(|i| words.get(i + 1).copied())
}

/// `host:pid` from the words before `[dev] NCCL ...`.
fn process_of(prefix: &str) -> Option<String> {
    let word = prefix
        .split_whitespace()
        .rev()
        .find(|w| w.matches(':').count() >= 2)?;
    let mut parts = word.rsplitn(3, ':');
    let _tid = parts.next()?;
    let pid = parts.next()?;
    let host = parts.next()?.rsplit(']').next()?.trim();
    Some(format!("{host}:{pid}"))
}

#[derive(Default)]
struct CollectiveAcc {
    calls: u64,
    total_bytes: u64,
    sizes: BTreeMap<u64, u64>,
}

pub fn parse(input: &str) -> Parsed<NcclReport> {
    let mut diagnostics = Vec::new();
    let mut report = NcclReport::default();
    let mut comms: BTreeMap<String, NcclCommunicator> = BTreeMap::new();
    // comm pointer (per process) → commId, to attach nNodes lines that name only the pointer.
    let mut pointer_to_id: BTreeMap<(Option<String>, String), String> = BTreeMap::new();
    let mut nnodes_by_pointer: BTreeMap<(Option<String>, String), u32> = BTreeMap::new();
    let mut transports: BTreeMap<String, (BTreeSet<(u32, u32)>, u64)> = BTreeMap::new();
    let mut collectives: BTreeMap<(String, String), CollectiveAcc> = BTreeMap::new();
    let mut choices: BTreeSet<(String, u64, String, String)> = BTreeSet::new();
    let mut warnings: BTreeSet<String> = BTreeSet::new();
    let mut seen_nccl = false;
    for (i, line) in input.lines().enumerate() {
        // The message may start mid-line, after the program's own output.
        let found = [(" NCCL INFO ", "INFO"), (" NCCL WARN ", "WARN")]
            .iter()
            .filter_map(|(marker, level)| line.find(marker).map(|at| (at, *marker, *level)))
            .min();
        let Some((at, marker, level)) = found else {
            continue;
        };
        {
            let prefix = &line[..at];
            let body = line[at + marker.len()..].trim();
            seen_nccl = true;
            let process = process_of(prefix);
            if level == "WARN" {
                warnings.insert(body.to_string());
                continue;
            }
            let words: Vec<&str> = body.split_whitespace().collect();
            if let Some(v) = body.strip_prefix("NCCL version ") {
                report.version.get_or_insert_with(|| v.trim().to_string());
            } else if let Some(net) = body.strip_prefix("Using network ") {
                let net = net.trim().to_string();
                if !report.networks.contains(&net) {
                    report.networks.push(net);
                }
            } else if body.starts_with("ncclCommInitRankConfig") && body.ends_with("Init COMPLETE")
            {
                let num = |k: &str| after(&words, k).and_then(|v| v.parse::<u32>().ok());
                let (Some(comm_id), Some(rank), Some(nranks)) =
                    (after(&words, "commId"), num("rank"), num("nranks"))
                else {
                    diagnostics.push(Diag::at(
                        i + 1,
                        format!("an init line without commId, rank or nranks: {body:?}"),
                    ));
                    continue;
                };
                if let Some(ptr) = after(&words, "comm") {
                    pointer_to_id.insert((process.clone(), ptr.to_string()), comm_id.to_string());
                }
                let comm = comms
                    .entry(comm_id.to_string())
                    .or_insert_with(|| NcclCommunicator {
                        comm_id: comm_id.to_string(),
                        nranks,
                        nnodes: None,
                        ranks: Vec::new(),
                    });
                if !comm.ranks.iter().any(|r| r.rank == rank) {
                    comm.ranks.push(NcclRank {
                        rank,
                        cuda_dev: num("cudaDev"),
                        nvml_dev: num("nvmlDev"),
                        bus_id: after(&words, "busId").map(str::to_string),
                        process: process.clone(),
                    });
                }
            } else if words.first() == Some(&"comm") && words.contains(&"nNodes") {
                if let (Some(ptr), Some(n)) = (
                    words.get(1),
                    after(&words, "nNodes").and_then(|v| v.parse().ok()),
                ) {
                    nnodes_by_pointer.insert((process.clone(), ptr.to_string()), n);
                }
            } else if words.first() == Some(&"Channel") && body.contains(" via ") {
                // Channel 00/0 : 0[0] -> 1[1] [send] via P2P/CUMEM/read
                let rank_of = |w: &str| w.split('[').next().and_then(|r| r.parse::<u32>().ok());
                let arrow = words.iter().position(|w| *w == "->");
                let pair = arrow
                    .and_then(|a| Some((rank_of(words.get(a - 1)?)?, rank_of(words.get(a + 1)?)?)));
                let via = body.split(" via ").nth(1).unwrap_or("").trim().to_string();
                match pair {
                    Some(p) if !via.is_empty() => {
                        let t = transports.entry(via).or_default();
                        t.0.insert(p);
                        t.1 += 1;
                    }
                    _ => diagnostics.push(Diag::at(
                        i + 1,
                        format!("a channel line without ranks or transport: {body:?}"),
                    )),
                }
            } else if words.first() == Some(&"Channel") && words.get(2) == Some(&":") {
                report.ring_channels += 1;
            } else if words.first() == Some(&"Trees") {
                report.tree_lines += 1;
            } else if let Some((op, rest_of)) = body.split_once(": opCount ") {
                let w: Vec<&str> = rest_of.split_whitespace().collect();
                let count = after(&w, "count").and_then(|v| v.parse::<u64>().ok());
                let dt = after(&w, "datatype").and_then(|v| v.parse::<u32>().ok());
                let (Some(count), Some(dt)) = (count, dt) else {
                    diagnostics.push(Diag::at(
                        i + 1,
                        format!("a collective without count or datatype: {body:?}"),
                    ));
                    continue;
                };
                let (name, size) = datatype(dt);
                let bytes = count * size.unwrap_or(1);
                if size.is_none() {
                    diagnostics.push(Diag::at(
                        i + 1,
                        format!("unknown NCCL datatype {dt}: bytes counted as elements"),
                    ));
                }
                let acc = collectives
                    .entry((op.trim().to_string(), name))
                    .or_default();
                acc.calls += 1;
                acc.total_bytes += bytes;
                *acc.sizes.entry(bytes).or_default() += 1;
            } else if body.contains(" Bytes -> Algo ") {
                // AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}
                let op = words.first().map(|w| w.trim_end_matches(':').to_string());
                let bytes = words.get(1).and_then(|b| b.parse::<u64>().ok());
                if let (Some(op), Some(bytes), Some(algo), Some(proto)) =
                    (op, bytes, after(&words, "Algo"), after(&words, "proto"))
                {
                    choices.insert((op, bytes, algo.to_string(), proto.to_string()));
                }
            }
        }
    }
    for (key, n) in nnodes_by_pointer {
        if let Some(c) = pointer_to_id.get(&key).and_then(|id| comms.get_mut(id)) {
            c.nnodes = Some(n);
        }
    }
    report.communicators = comms.into_values().collect();
    for c in &mut report.communicators {
        c.ranks.sort_by_key(|r| r.rank);
    }
    report.transports = transports
        .into_iter()
        .map(|(transport, (pairs, connections))| NcclTransport {
            kind: transport.split('/').next().unwrap_or("").to_string(),
            transport,
            pairs: pairs.len() as u64,
            connections,
        })
        .collect();
    report.transports.sort_by(|a, b| {
        b.connections
            .cmp(&a.connections)
            .then(a.transport.cmp(&b.transport))
    });
    report.collectives = collectives
        .into_iter()
        .map(|((op, datatype), acc)| NcclCollective {
            op,
            datatype,
            calls: acc.calls,
            total_bytes: acc.total_bytes,
            sizes: acc
                .sizes
                .into_iter()
                .map(|(bytes, calls)| NcclSizeCount { bytes, calls })
                .collect(),
        })
        .collect();
    report.algorithm_choices = choices
        .into_iter()
        .map(|(op, bytes, algorithm, protocol)| NcclAlgorithmChoice {
            op,
            bytes,
            algorithm,
            protocol,
        })
        .collect();
    report.warnings = warnings.into_iter().collect();
    if !seen_nccl {
        diagnostics.push(Diag::general(
            "no NCCL INFO or WARN line: was the program run with NCCL_DEBUG=INFO, and did it create a communicator?",
        ));
    }
    Parsed {
        value: report,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glued_lines_and_the_process_prefix() {
        let line = "     8388608       2097152     float     sum      -1mew0:64904:64904 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 2097152 datatype 7 op 0 root 0 comm 0x55 [nranks=2] stream 0x5";
        let p = parse(line);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let c = &p.value.collectives[0];
        assert_eq!(
            (c.op.as_str(), c.datatype.as_str(), c.total_bytes),
            ("AllReduce", "float32", 8_388_608)
        );
        assert_eq!(
            process_of("[2025-01-01 10:24:27] ip-1:35113:35467"),
            Some("ip-1:35113".into())
        );
        assert!(!parse("hello\n").diagnostics.is_empty());
    }
}
