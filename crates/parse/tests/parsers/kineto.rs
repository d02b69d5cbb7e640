//! Kineto traces against an independent count (crates/parse/tests/tools/kineto_check.py) and
//! the program's own truth, each read plain and gzip-compressed.

use super::*;

fn kineto(case: &str) -> system_profile_model::metrics::TraceAnalysis {
    let path = data_dir("kineto").join(format!("{case}.json.gz"));
    let file = std::fs::File::open(&path).unwrap();
    let p = system_profile_parse::kineto::analyze_reader(flate2::read::GzDecoder::new(file));
    // The same trace read without being told it is compressed, and read decompressed: the
    // same analysis (its first two bytes decide).
    let compressed = std::fs::read(&path).unwrap();
    let mut plain = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&compressed[..]),
        &mut plain,
    )
    .unwrap();
    for bytes in [&compressed, &plain] {
        let sniffed = system_profile_parse::kineto::analyze_compressed_or_not(&bytes[..]).unwrap();
        assert_eq!(sniffed.value, p.value, "{case}");
    }
    // A CPU-only trace (gloo) says it has no GPU kernels; nothing else may be said.
    let cpu_only = case.starts_with("gloo-") || case.contains("-cpu");
    assert!(
        p.diagnostics
            .iter()
            .all(|d| cpu_only && d.message.starts_with("no GPU kernels")),
        "{case}: {:?}",
        p.diagnostics
    );
    p.value
}

/// Every number checked here was computed independently, with plain Python over the same
/// files: `python3 crates/parse/tests/tools/kineto_check.py crates/parse/tests/data/kineto/*.json.gz`.
/// Collectives against the truth: the program's parameter count and DDP's one bucket give the
/// gloo trace's all-reduces exactly (20 of 9,352 float32); the other figures were counted with
/// plain Python over the same files (per op: calls, bytes from shapes or NCCL's own element
/// count and dtype, summed durations).
#[test]
fn collectives_agree_with_the_program_and_an_independent_count() {
    let op = |a: &system_profile_model::metrics::TraceAnalysis, name: &str| {
        a.collectives
            .as_ref()
            .and_then(|c| c.ops.iter().find(|o| o.op == name).cloned())
            .unwrap_or_else(|| panic!("no {name} in {:?}", a.collectives))
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-3 * b.abs().max(1.0);
    let rank0 = kineto("gloo-ddp-2rank-cpu-rank0");
    let rank1 = kineto("gloo-ddp-2rank-cpu-rank1");
    for (a, waited_us) in [(&rank0, 208_526.208), (&rank1, 27_026.257)] {
        let ar = op(a, "all_reduce");
        assert_eq!(
            (
                ar.backend.as_str(),
                ar.calls,
                ar.sized_calls,
                ar.bytes_total
            ),
            ("gloo", 20, 20, 20 * 9_352 * 4),
            "{ar:?}"
        );
        assert_eq!((ar.bytes_p50, ar.bytes_p95), (Some(37_408), Some(37_408)));
        assert!(close(ar.latency_total_us.unwrap(), waited_us), "{ar:?}");
        let b = op(a, "broadcast");
        assert_eq!((b.calls, b.bytes_total), (4, 37_528), "{b:?}");
        assert_eq!(op(a, "all_gather").bytes_total, 8);
        let c = a.collectives.as_ref().unwrap();
        assert!(
            c.cpu_overlap_us <= c.cpu_comm_us.min(c.cpu_compute_us) + 1e-6,
            "{c:?}"
        );
        assert!(c.cpu_compute_us > 0.0, "{c:?}");
    }
    // Rank 1 sleeps after each step: rank 0 waits for it inside every all-reduce.
    let comm = |a: &system_profile_model::metrics::TraceAnalysis| {
        a.collectives.as_ref().unwrap().cpu_comm_us
    };
    assert!(comm(&rank0) > 3.0 * comm(&rank1));
    let nccl = kineto("hta-a100-2rank-nccl-allreduce");
    let ar = op(&nccl, "all_reduce");
    assert_eq!(
        (
            ar.backend.as_str(),
            ar.calls,
            ar.bytes_total,
            ar.source.as_str()
        ),
        ("nccl", 10, 204_456_256, "nccl kernels"),
        "{ar:?}"
    );
    // In the devices' window (HTA's: kernels before the last profiler step began), which the
    // kernel table uses too: 10 of the trace's 15 all-reduce kernels.
    assert!(close(ar.latency_total_us.unwrap(), 24_211.804), "{ar:?}");
    assert_eq!(ar.group_size, Some(2));
    // The 128-rank trace's kernels predate NCCL's arguments: its `nccl:` annotations give
    // counts and sizes, never a transfer time or bandwidth made of launch times.
    let sampled = kineto("hta-128rank-sampled-rank0");
    let ar = op(&sampled, "all_reduce");
    assert_eq!(
        (ar.calls, ar.latency_total_us, ar.algbw_gbps),
        (4, None, None),
        "{ar:?}"
    );
    let b = op(&nccl, "broadcast");
    assert_eq!((b.calls, b.bytes_total), (4, 425_808), "{b:?}");
    // A trace with no collective says none.
    assert!(kineto("hta-a100-alexnet-single").collectives.is_none());
}

#[test]
fn kineto_traces_agree_with_an_independent_count() {
    let close = |a: f64, b: f64| (a - b).abs() < 1e-3 * b.abs().max(1.0);
    // (case, kernels, launches, span, busy, kernel, comm, overlap) on device 0
    for (case, kernels, launches, span, busy, kernel, comm, overlap) in [
        (
            "hta-128rank-sampled-rank0",
            577,
            577,
            600_058.0,
            278_680.0,
            301_579.0,
            195_327.0,
            23_068.0,
        ),
        (
            "hta-a100-2rank-nccl-allreduce",
            1800,
            1800,
            435_587.562,
            99_167.887,
            101_224.878,
            24_289.050,
            3_585.678,
        ),
        (
            "hta-a100-alexnet-single",
            79,
            79,
            12_920_244.0,
            66_141.0,
            10_692.0,
            0.0,
            0.0,
        ),
    ] {
        let a = kineto(case);
        assert_eq!(
            (a.launches.kernels, a.launches.launches),
            (kernels, launches),
            "{case}"
        );
        let d = &a.devices[0];
        assert!(
            close(d.span_us, span),
            "{case}: span {} vs {span}",
            d.span_us
        );
        assert!(
            close(d.busy_us, busy),
            "{case}: busy {} vs {busy}",
            d.busy_us
        );
        assert!(
            close(d.kernel_us, kernel),
            "{case}: kernel {} vs {kernel}",
            d.kernel_us
        );
        assert!(
            close(d.comm_us, comm),
            "{case}: comm {} vs {comm}",
            d.comm_us
        );
        assert!(
            close(d.comm_compute_overlap_us, overlap),
            "{case}: overlap {} vs {overlap}",
            d.comm_compute_overlap_us
        );
        assert!(close(d.idle_us, span - busy));
        insta::with_settings!({snapshot_suffix => case}, {
            insta::assert_json_snapshot!("kineto", a);
        });
    }
    let copies = kineto("hta-128rank-sampled-rank0").copies;
    let by = |dir: &str| {
        copies
            .iter()
            .find(|c| c.direction == dir)
            .map(|c| (c.count, c.bytes))
    };
    assert_eq!(by("HtoD"), Some((12, 2_367_536)));
    assert_eq!(by("DtoH"), Some((4, 3_626)));
    assert_eq!(by("DtoD"), Some((4, 130_668_436)));
    // HTA's own temporal breakdown of the 2-rank trace, run with HTA_DISABLE_NS_ROUNDING=1
    // (bench/analyze_trace_vs_hta.sh): span 435,587.56, idle 336,419.71, compute 76,935.83.
    let hta = kineto("hta-a100-2rank-nccl-allreduce");
    let d = &hta.devices[0];
    assert!((d.idle_us - 336_419.714_688).abs() < 0.5, "{d:?}");
    assert!((d.compute_us - 76_935.828).abs() < 0.5, "{d:?}");
    assert_eq!(
        (hta.window.profiler_steps, hta.window.last_step_excluded),
        (3, true)
    );
    assert_eq!(
        hta.window.gpu_events_kept + hta.window.gpu_events_excluded,
        2700 + 960 + 114
    );
    let nccl = kineto("hta-a100-2rank-nccl-allreduce");
    assert_eq!(nccl.rank, Some(0));
    assert_eq!(
        nccl.devices[0].name.as_deref(),
        Some("NVIDIA A100-PG509-200")
    );
    assert!(
        nccl.categories
            .iter()
            .any(|c| c.category == "nccl" && c.count == 14),
        "{:?}",
        nccl.categories
    );
    // Per copy direction: size median and p95 (nearest rank) and the pageable copies, as
    // tests/tools/kineto_check.py counts them.
    for (case, direction, p50, p95, pageable) in [
        (
            "hta-128rank-sampled-rank0",
            "DtoD",
            16_777_216,
            78_465_024,
            0,
        ),
        ("hta-128rank-sampled-rank0", "DtoH", 1, 3_048, 4),
        ("hta-128rank-sampled-rank0", "HtoD", 1_024, 786_432, 8),
        ("hta-a100-2rank-nccl-allreduce", "DtoD", 1_024, 2_097_152, 0),
        ("hta-a100-alexnet-single", "HtoD", 16_384, 150_994_944, 16),
    ] {
        let a = kineto(case);
        let c = a.copies.iter().find(|c| c.direction == direction).unwrap();
        assert_eq!(
            (c.bytes_p50, c.bytes_p95, c.pageable_count),
            (Some(p50), Some(p95), Some(pageable)),
            "{case} {direction}"
        );
    }
}

fn trace_file(
    rank: u32,
    analysis: system_profile_model::metrics::TraceAnalysis,
) -> system_profile_model::trace::TraceFile {
    system_profile_model::trace::TraceFile {
        path: format!("rank{rank}"),
        bytes: 0,
        analysis,
        node_rank: Some(rank),
        diagnostics: Vec::new(),
    }
}

/// The real two-rank gloo traces (one machine, one clock), and rank 1's rewritten 2.5 s
/// ahead as a second node's clock would be: the collectives bound rank 1's offset to within a
/// millisecond of the truth (0, then 2.5 s), the same shift found both ways; merged, the two
/// ranks' all-reduces end together again.
#[test]
fn ranks_clocks_line_up_on_their_collectives_and_merge() {
    use system_profile_parse::kineto::{align_clocks, merge_inputs, write_merged};
    let gz = |rank: u32| {
        std::fs::read(data_dir("kineto").join(format!("gloo-ddp-2rank-cpu-rank{rank}.json.gz")))
            .unwrap()
    };
    let skew_us = 2.5e6;
    let mut shifted: serde_json::Value =
        serde_json::from_reader(flate2::read::GzDecoder::new(&gz(1)[..])).unwrap();
    for e in shifted["traceEvents"].as_array_mut().unwrap() {
        if let Some(ts) = e["ts"].as_f64() {
            e["ts"] = serde_json::json!(ts + skew_us);
        }
    }
    let shifted = serde_json::to_vec(&shifted).unwrap();
    let analyse = |bytes: &[u8]| {
        system_profile_parse::kineto::analyze_compressed_or_not(bytes)
            .unwrap()
            .value
    };
    let (r0, r1, r1_skewed) = (analyse(&gz(0)), analyse(&gz(1)), analyse(&shifted));
    assert_eq!(r1.sync_points.len(), 25, "the gloo collectives of rank 1");
    let same_clock = align_clocks(&[trace_file(0, r0.clone()), trace_file(1, r1)]).unwrap();
    let other_clock = align_clocks(&[trace_file(0, r0), trace_file(1, r1_skewed)]).unwrap();
    for (alignment, truth) in [(&same_clock, 0.0), (&other_clock, skew_us)] {
        let c = &alignment.ranks[1];
        let (offset, unc) = (c.offset_us.unwrap(), c.uncertainty_us.unwrap());
        assert!(c.bounded, "{c:?}");
        assert!(
            (offset - truth).abs() <= unc && unc < 1000.0,
            "{offset} ± {unc} for {truth}"
        );
        assert_eq!(c.collectives, 25);
    }
    let found = other_clock.ranks[1].offset_us.unwrap() - same_clock.ranks[1].offset_us.unwrap();
    assert!((found - skew_us).abs() < 1.0, "{found}");

    let traces = [
        trace_file(0, Default::default()),
        trace_file(1, Default::default()),
    ];
    let r0_bytes = gz(0);
    let (inputs, left_out) = merge_inputs(vec![&r0_bytes[..], &shifted[..]], &traces, &other_clock);
    assert!(left_out.is_empty());
    let mut merged = Vec::new();
    let stats = write_merged(inputs, &other_clock, &mut merged).unwrap();
    // Every event of both (4,060 each) but their 2 `process_sort_index` each: ours order the
    // ranks instead.
    assert_eq!((stats.events, stats.skipped), (8116, 0));
    let merged: serde_json::Value = serde_json::from_slice(&merged).unwrap();
    let mut ends: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
    for e in merged["traceEvents"].as_array().unwrap() {
        if e["name"] == "gloo:all_reduce" {
            let end = e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap();
            ends.entry(e["pid"].as_u64().unwrap())
                .or_default()
                .push(end);
        }
    }
    let lanes: Vec<Vec<f64>> = ends
        .into_values()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            v
        })
        .collect();
    assert_eq!(lanes.len(), 2, "one lane per rank");
    assert_eq!(lanes[0].len(), lanes[1].len());
    let worst = lanes[0]
        .iter()
        .zip(&lanes[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        worst < 5_000.0,
        "all-reduces end {worst} µs apart once merged"
    );
}

/// torch's operators on the CPU against torch.profiler's own table (`key_averages`, written by
/// the process that recorded the trace): Lightning's demo transformer, whose output layer over
/// a 13,578-word vocabulary dominates, as the shapes say.
#[test]
fn cpu_operators_agree_with_torch_profilers_own_table() {
    let a = kineto("lightning-transformer-cpu");
    let truth: serde_json::Value = serde_json::from_slice(
        &std::fs::read(data_dir("kineto").join("lightning-transformer-cpu.truth.json")).unwrap(),
    )
    .unwrap();
    let rows = truth["key_averages_top10_by_self_cpu"].as_array().unwrap();
    for (ours, theirs) in a.cpu_ops.iter().zip(rows) {
        assert_eq!(
            ours.name,
            theirs["name"].as_str().unwrap(),
            "{:?}",
            a.cpu_ops
        );
        assert_eq!(ours.calls, theirs["calls"].as_u64().unwrap(), "{ours:?}");
        for (mine, key) in [(ours.self_us, "self_us"), (ours.total_us, "total_us")] {
            let t = theirs[key].as_f64().unwrap();
            // The JSON rounds each event to the nanosecond; torch sums unrounded.
            assert!(
                (mine - t).abs() <= 1e-3 * t.max(1.0),
                "{} {key}: {mine} vs {t}",
                ours.name
            );
        }
    }
    let shapes = |name: &str| {
        a.cpu_ops
            .iter()
            .find(|o| o.name == name)
            .map(|o| o.shapes.clone())
            .unwrap()
    };
    assert!(
        shapes("aten::addmm")[0].contains("13578"),
        "{:?}",
        shapes("aten::addmm")
    );
    assert!(shapes("aten::_log_softmax")[0].contains("13578"));
    let share: f64 = a.cpu_ops[..4].iter().map(|o| o.self_percent).sum();
    assert!(
        (share - 67.9).abs() < 0.5,
        "the first four: {share}% (torch's table: 67.94%)"
    );
}
