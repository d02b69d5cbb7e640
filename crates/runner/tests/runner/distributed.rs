//! torch_profiler inside every rank of a distributed launch (torchrun, two CPU ranks, gloo),
//! checked against each program's own truth: DDP's buckets, FSDP's shards, the step log.

use super::*;
use system_profile_model::run::{ArtifactKind, RunStatus};
use system_profile_runner::execute;
use system_profile_runner::Execution;

/// torch_profiler on `torchrun --standalone --nproc_per_node 2 examples/<example>`, shapes
/// recorded (gloo's annotations carry sizes only then), traced on `schedule` when given.
fn two_ranks_of(
    py: &str,
    example: &str,
    schedule: Option<system_profile_model::run::TorchSchedule>,
) -> RunProfilerInput {
    let torchrun = Path::new(py).with_file_name("torchrun");
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(example);
    let mut i = input(
        Method::TorchProfiler,
        command(&[
            torchrun.to_str().unwrap(),
            "--standalone",
            "--nproc_per_node",
            "2",
            example.to_str().unwrap(),
        ]),
    );
    i.options.record_shapes = Some(true);
    i.options.schedule = schedule;
    i
}

/// Under torchrun, torch_profiler goes inside every rank (no code edited) and each rank's
/// trace is analysed: the all-reduces are exactly what DDP must make (one bucket of 9,352
/// float32 per step), and the slow rank is the one the others wait for.
#[tokio::test]
async fn torch_profiler_goes_inside_every_rank_of_torchrun() {
    let py = python();
    if !module(&py, "torch") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut i = two_ranks_of(&py, "ddp_gloo.py", None);
    i.env.insert("STEPS".into(), "20".into());
    i.env.insert("SLOW_RANK_S".into(), "0.02".into());
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(
        e.argv.iter().any(|a| a.ends_with("sp_torch_profiler.py")),
        "{:?}",
        e.argv
    );
    let ranks = e.metrics.ranks.as_ref().expect("one trace per rank");
    assert_eq!(ranks.traces.len(), 2, "{ranks:?}");
    for (n, t) in ranks.traces.iter().enumerate() {
        assert_eq!(t.analysis.rank, Some(n as u32));
        let ar = all_reduce(t);
        assert_eq!(
            (ar.backend.as_str(), ar.calls, ar.bytes_total),
            ("gloo", 20, 20 * 9_352 * 4),
            "rank {n}: {ar:?}"
        );
    }
    let balance = ranks.balance.as_ref().expect("balance");
    assert_eq!(balance.stragglers, vec![1], "{balance:?}");
    assert_eq!(e.metrics.trace.as_ref().and_then(|t| t.rank), Some(0));
    clocks_line_up_on_one_machine(&e);
}

/// A rank's all-reduces, as its trace's analysis summed them.
fn all_reduce(
    t: &system_profile_model::trace::TraceFile,
) -> &system_profile_model::collectives::CollectiveOp {
    let c = t.analysis.collectives.as_ref().expect("collectives");
    c.ops
        .iter()
        .find(|o| o.op == "all_reduce")
        .expect("all_reduce")
}

/// One machine's ranks share a clock: the offset the collectives bound for rank 1 must hold
/// the truth, 0, within its uncertainty, and the merged timeline is left as an artifact.
fn clocks_line_up_on_one_machine(e: &Execution) {
    let ranks = e.metrics.ranks.as_ref().expect("one trace per rank");
    let a = ranks.alignment.as_ref().expect("clocks lined up");
    let c = a.ranks.iter().find(|c| c.rank == 1).expect("rank 1");
    let (offset, unc) = (
        c.offset_us.expect("offset"),
        c.uncertainty_us.expect("bound"),
    );
    assert!(c.bounded && offset.abs() <= unc && unc < 10_000.0, "{c:?}");
    let merged = a.merged_trace.as_deref().expect("merged trace");
    assert!(
        e.artifacts
            .iter()
            .any(|f| f.kind == ArtifactKind::MergedTrace && f.path.to_string_lossy() == merged),
        "{:?}",
        e.artifacts
    );
}

/// Real code nobody here wrote: Lightning's demo transformer trained by Lightning's own DDP
/// strategy under torchrun. The all-reduces of the traced steps are exactly DDP's buckets as
/// its reducer reports them (printed by the program), and the rank made slow is named.
#[tokio::test]
async fn lightning_ddp_under_torchrun_matches_ddps_own_buckets() {
    let py = python();
    if !module(&py, "torch") || !module(&py, "lightning") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut i = two_ranks_of(
        &py,
        "lightning_ddp.py",
        Some(system_profile_model::run::TorchSchedule {
            wait: 1,
            warmup: 2,
            active: 3,
            repeat: 1,
            after_trace: Default::default(),
        }),
    );
    i.env.insert("STEPS".into(), "10".into());
    // Far above what preemption on a busy machine makes of a rank's step.
    i.env.insert("SLOW_RANK_S".into(), "0.3".into());
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let truth: serde_json::Value = serde_json::from_str(
        e.stdout_tail
            .lines()
            .find_map(|l| l.strip_prefix("ddp buckets: "))
            .unwrap_or_else(|| panic!("the program prints its buckets: {}", e.stdout_tail)),
    )
    .unwrap();
    let mut buckets: Vec<u64> = truth["bucket_bytes"]
        .as_str()
        .unwrap()
        .split(", ")
        .map(|b| b.parse().unwrap())
        .collect();
    buckets.sort_unstable();
    assert_eq!(
        buckets.iter().sum::<u64>(),
        truth["params"].as_u64().unwrap() * 4,
        "the buckets hold every float32 parameter once: {truth}"
    );
    let ranks = e.metrics.ranks.as_ref().expect("one trace per rank");
    assert_eq!(ranks.traces.len(), 2, "{ranks:?}");
    for t in &ranks.traces {
        let ar = all_reduce(t);
        // Three active steps, one all-reduce per bucket each.
        assert_eq!(
            (ar.calls, ar.bytes_total),
            (3 * buckets.len() as u64, 3 * buckets.iter().sum::<u64>()),
            "rank {:?}: {ar:?}",
            t.analysis.rank
        );
        assert_eq!(
            (ar.bytes_p50, ar.bytes_p95),
            (buckets.first().copied(), buckets.last().copied()),
            "{ar:?}"
        );
    }
    let balance = ranks.balance.as_ref().expect("balance");
    assert_eq!(balance.stragglers, vec![1], "{balance:?}");
    // The traced steps are matched step by step (ProfilerStep#N) across the ranks.
    clocks_line_up_on_one_machine(&e);
}

/// Real code nobody here wrote, sharded: Lightning's demo transformer under PyTorch's FSDP2 on
/// two CPU ranks (Lightning's own FSDP strategy refuses the CPU). A step's collectives are what
/// FSDP's own parameters predict (each group all-gathered as shards, its gradients reduced
/// whole), and each rank's step time agrees with the program's own log of its steps.
#[tokio::test]
async fn fsdp_under_torchrun_matches_fsdps_own_shards_and_step_log() {
    let py = python();
    if !module(&py, "torch") || !module(&py, "lightning") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut i = two_ranks_of(
        &py,
        "fsdp_cpu.py",
        Some(system_profile_model::run::TorchSchedule {
            wait: 1,
            warmup: 1,
            active: 3,
            repeat: 1,
            after_trace: Default::default(),
        }),
    );
    i.env.insert("STEPS".into(), "8".into());
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let said = |prefix: &str| -> Vec<serde_json::Value> {
        e.stdout_tail
            .lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(|j| serde_json::from_str(j).unwrap())
            .collect()
    };
    let groups = said("fsdp groups: ")
        .pop()
        .unwrap_or_else(|| panic!("the program prints its groups: {}", e.stdout_tail));
    let bytes = |g: &serde_json::Value, k: &str| g[k].as_u64().unwrap();
    let layers = groups["layers"].as_array().unwrap();
    let root = &groups["root"];
    // Per step: the root's shards gathered once, each layer's twice; every group reduced once.
    let gathered = bytes(root, "shard_bytes")
        + 2 * layers.iter().map(|l| bytes(l, "shard_bytes")).sum::<u64>();
    let reduced =
        bytes(root, "full_bytes") + layers.iter().map(|l| bytes(l, "full_bytes")).sum::<u64>();
    let (gathers, reductions) = (1 + 2 * layers.len() as u64, 1 + layers.len() as u64);
    let ranks = e.metrics.ranks.as_ref().expect("one trace per rank");
    assert_eq!(ranks.traces.len(), 2, "{ranks:?}");
    let logs = said("step times: ");
    for t in &ranks.traces {
        let c = t.analysis.collectives.as_ref().expect("collectives");
        let op = |name: &str| c.ops.iter().find(|o| o.op == name);
        let ag = op("all_gather").expect("all_gather");
        assert_eq!(
            (ag.calls, ag.bytes_total),
            (3 * gathers, 3 * gathered),
            "three active steps of all-gathers, rank {:?}: {ag:?}",
            t.analysis.rank
        );
        // gloo has no reduce-scatter of its own here: FSDP reduces gradients by all-reduce;
        // a later PyTorch that reduce-scatters is held to the same count.
        let red = op("all_reduce")
            .or_else(|| op("reduce_scatter"))
            .expect("a gradient reduction");
        assert_eq!(red.calls, 3 * reductions, "{red:?}");
        if red.op == "all_reduce" {
            assert_eq!(red.bytes_total, 3 * reduced, "{red:?}");
        }
        // The step time we read from the trace is one of the program's own steps, averaged.
        let ours_s = t.analysis.window.step_mean_us.expect("whole steps") / 1e6;
        let rank = t.analysis.rank.expect("rank");
        let log = logs
            .iter()
            .find(|l| l["rank"] == rank)
            .unwrap_or_else(|| panic!("rank {rank} logs its steps: {}", e.stdout_tail));
        let steps: Vec<f64> = log["step_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect();
        let (lo, hi) = steps[1..]
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
        assert!(
            ours_s >= lo * 0.95 && ours_s <= hi * 1.05,
            "rank {rank}: mean step {ours_s:.4} s from the trace, the program's own steps {steps:?}"
        );
    }
}

/// A long DDP training ended by the window (`end_program`) on every rank: each rank traced
/// exactly the window's all-reduces, none hung waiting for a rank that had ended, and the
/// program's end-of-training line never came.
#[tokio::test]
async fn every_rank_of_torchrun_ends_once_its_window_is_traced() {
    let py = python();
    if !module(&py, "torch") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut i = two_ranks_of(
        &py,
        "ddp_gloo.py",
        Some(system_profile_model::run::TorchSchedule {
            wait: 2,
            warmup: 1,
            active: 2,
            repeat: 1,
            after_trace: system_profile_model::run::AfterTrace::EndProgram,
        }),
    );
    // Hours of steps: only the window's end can end it within the test.
    i.env.insert("STEPS".into(), "10000000".into());
    i.env.insert("SLOW_RANK_S".into(), "0.02".into());
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert_eq!(e.exit_code, Some(0), "{e:?}");
    assert!(!e.stdout_tail.contains("done:"), "{:?}", e.stdout_tail);
    let ranks = e.metrics.ranks.as_ref().expect("one trace per rank");
    assert_eq!(ranks.traces.len(), 2, "{ranks:?}");
    for t in &ranks.traces {
        let ar = all_reduce(t);
        assert_eq!(
            (ar.calls, ar.bytes_total),
            (2, 2 * 9_352 * 4),
            "rank {:?}: {ar:?}",
            t.analysis.rank
        );
    }
}
