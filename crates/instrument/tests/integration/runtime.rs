//! The runtime helper inside real programs: what it writes to the log, checked against the
//! programs' own accounting.

use crate::support::*;
use system_profile_model::instrument::{
    CollectiveRecord, DuplicatesRecord, InstrumentRecord as R, LineRange, Measure, MemoryRecord,
    NoteRecord, Strategy, SummaryRecord, TimingRecord, TransferRecord,
};

const BUSY: &str = r#"import json, sys, time


def work(ms):
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass
    return ms


def main():
    own = []
    for i in range(40):
        t0 = time.perf_counter()
        work(2 + i % 4)
        own.append(time.perf_counter() - t0)
    with open(sys.argv[1], "w") as f:
        json.dump(own, f)


if __name__ == "__main__":
    main()
"#;

fn timings(records: &[R], change: &str) -> Vec<(u64, f64, f64)> {
    records
        .iter()
        .filter_map(|r| match r {
            R::Timing(TimingRecord {
                change: c,
                call,
                wall_s,
                cpu_s,
                ..
            }) if c == change => Some((*call, *wall_s, *cpu_s)),
            _ => None,
        })
        .collect()
}

fn summary(records: &[R], change: &str) -> (u64, u64) {
    records
        .iter()
        .find_map(|r| match r {
            R::Summary(SummaryRecord {
                change: c,
                calls,
                sampled,
                ..
            }) if c == change => Some((*calls, *sampled)),
            _ => None,
        })
        .expect("a summary record")
}

#[test]
fn timing_agrees_with_the_programs_own_clock() {
    let root = Root::new(&[("busy.py", BUSY)]);
    let r = root.instrument(
        "busy.py",
        Measure::Timing,
        Strategy::Decorator,
        "work",
        None,
    );
    let id = r.change_ids.last().unwrap().clone();
    assert_eq!(r.run_command[1], "busy.py");
    root.run(&["busy.py", "own.json"]);
    let own: Vec<f64> = serde_json::from_str(&read(&root.file("own.json"))).unwrap();
    let t = timings(&root.records(), &id);
    assert_eq!(t.len(), 40);
    let mut gaps = Vec::new();
    for (call, wall, cpu) in &t {
        let theirs = own[*call as usize - 1];
        let asked = (2 + (*call as usize - 1) % 4) as f64 / 1000.0;
        // Our window is inside theirs and holds the whole busy loop.
        assert!(*wall <= theirs + 1e-6, "call {call}: {wall} > {theirs}");
        assert!(*wall >= asked, "call {call}: {wall} < {asked}");
        assert!(
            *cpu > 0.0 && *cpu <= wall + 0.002,
            "call {call}: cpu {cpu}, wall {wall}"
        );
        gaps.push(theirs - wall);
    }
    // The wrapper's own cost is what a call that was not preempted shows: the smallest gap.
    // A busy machine preempts many calls between the two clocks (half of them beside
    // `stress-ng --cpu 4`), but not every one; a wrapper that cost 100 µs would show it in all.
    gaps.sort_by(f64::total_cmp);
    assert!(gaps[0] < 100e-6, "smallest gap {} s: {gaps:?}", gaps[0]);
    assert_eq!(summary(&root.records(), &id), (40, 40));
}

const MANY: &str = r#"import sys


def f(x):
    return x + 1


def g(x):
    return x * 2


total = 0
for i in range(int(sys.argv[1])):
    total += f(i) + g(i)
print(total)
"#;

#[test]
fn sampling_takes_every_nth_call_or_the_given_fraction() {
    let root = Root::new(&[("many.py", MANY)]);
    let every = root.instrument(
        "many.py",
        Measure::Timing,
        Strategy::Decorator,
        "f",
        Some(10),
    );
    let mut rate = input("many.py", Measure::Timing, Strategy::Decorator);
    rate.function = Some("g".into());
    rate.sample_rate = Some(0.25);
    let rate = root.with(rate);
    let out = root.run(&["many.py", "4000"]);
    // The program computes what it did before.
    let n: u64 = 4000;
    assert_eq!(
        out.trim(),
        ((0..n).map(|i| (i + 1) + 2 * i).sum::<u64>()).to_string()
    );
    let recs = root.records();
    let every_id = every.change_ids.last().unwrap();
    let t = timings(&recs, every_id);
    assert_eq!(t.len(), 400);
    assert!(t
        .iter()
        .enumerate()
        .all(|(k, (call, _, _))| *call == 1 + 10 * k as u64));
    assert_eq!(summary(&recs, every_id), (4000, 400));
    let rate_id = rate.change_ids.last().unwrap();
    let (calls, sampled) = summary(&recs, rate_id);
    assert_eq!(calls, 4000);
    // Binomial(4000, 0.25): mean 1000, sd 27; ±6 sd.
    assert!((838..=1162).contains(&sampled), "{sampled}");
    assert_eq!(timings(&recs, rate_id).len() as u64, sampled);
}

const FORKS: &str = r#"import multiprocessing as mp


def f(x):
    return x * 2


def child():
    for i in range(3):
        f(i)


if __name__ == "__main__":
    for i in range(5):
        f(i)
    ctx = mp.get_context("fork")
    p = ctx.Process(target=child)
    p.start()
    p.join()
    assert p.exitcode == 0
"#;

#[test]
fn forked_children_count_their_own_calls_and_flush_on_exit() {
    let root = Root::new(&[("forks.py", FORKS)]);
    let r = root.instrument(
        "forks.py",
        Measure::Timing,
        Strategy::Decorator,
        "f",
        Some(2),
    );
    root.run(&["forks.py"]);
    let id = r.change_ids.last().unwrap();
    let recs = root.records();
    let mut per_pid: Vec<(u32, u64, u64)> = recs
        .iter()
        .filter_map(|r| match r {
            R::Summary(s) if &s.change == id => Some((s.pid, s.calls, s.sampled)),
            _ => None,
        })
        .collect();
    per_pid.sort_by_key(|p| p.1);
    // The child (through multiprocessing's os._exit) and the parent, each with its own calls;
    // the child goes on with the parent's sampling phase (1 in 2), so 1 or 2 of its 3.
    assert_eq!(
        per_pid.iter().map(|p| p.1).collect::<Vec<_>>(),
        [3, 5],
        "{per_pid:?}"
    );
    assert_eq!(per_pid[1].2, 3);
    assert!((1..=2).contains(&per_pid[0].2), "{per_pid:?}");
    assert_ne!(per_pid[0].0, per_pid[1].0);
    let child_calls: Vec<u64> = recs
        .iter()
        .filter_map(|r| match r {
            R::Timing(t) if t.pid == per_pid[0].0 => Some(t.call),
            _ => None,
        })
        .collect();
    assert!(
        child_calls.iter().all(|c| (1..=3).contains(c)),
        "{child_calls:?}"
    );
}

const SHAPES: &str = r#"import asyncio, time


async def fetch(delay):
    await asyncio.sleep(delay)
    return delay


def numbers(n):
    for i in range(n):
        time.sleep(0.002)
        yield i


class Outer:
    class Inner:
        def method(self):
            return sum(numbers(5))


def loop_body():
    acc = 0
    for i in range(3):
        acc += i
        time.sleep(0.003)
    return acc


asyncio.run(fetch(0.02))
assert Outer.Inner().method() == 10
assert loop_body() == 3
assert fetch.__name__ == "fetch" and numbers.__name__ == "numbers"
"#;

#[test]
fn async_generators_nested_classes_and_blocks_are_measured() {
    let root = Root::new(&[("shapes.py", SHAPES)]);
    let a = root.instrument(
        "shapes.py",
        Measure::Timing,
        Strategy::Decorator,
        "fetch, numbers",
        None,
    );
    let b = root.instrument(
        "shapes.py",
        Measure::Timing,
        Strategy::Decorator,
        "Outer.Inner.method",
        None,
    );
    // Lines as they are after the changes above.
    let at = |needle: &str| root.line_of("shapes.py", needle);
    let mut block = input("shapes.py", Measure::Timing, Strategy::Context);
    block.lines = Some(LineRange {
        start: at("acc += i"),
        end: at("time.sleep(0.003)"),
    });
    let c = root.with(block);
    assert!(c.place.ends_with("of loop_body"), "{}", c.place);
    let mut marks = input("shapes.py", Measure::Timing, Strategy::Inline);
    marks.lines = Some(LineRange {
        start: at("acc = 0"),
        end: at("acc = 0"),
    });
    let d = root.with(marks);
    root.run(&["shapes.py"]);
    let recs = root.records();
    let a_id = a.change_ids.last().unwrap();
    let site = |name: &str, id: &str| -> Vec<f64> {
        recs.iter()
            .filter_map(|r| match r {
                R::Timing(TimingRecord {
                    change,
                    site,
                    wall_s,
                    ..
                }) if change == id && site.contains(name) => Some(*wall_s),
                _ => None,
            })
            .collect()
    };
    let fetch = site("fetch", a_id);
    assert_eq!(fetch.len(), 1);
    assert!(fetch[0] >= 0.02, "{fetch:?}");
    let numbers = site("numbers", a_id);
    assert_eq!(numbers.len(), 1);
    assert!(numbers[0] >= 0.01, "the generator's whole run: {numbers:?}");
    assert_eq!(site("method", b.change_ids.last().unwrap()).len(), 1);
    let loop_passes = site("of loop_body", c.change_ids.last().unwrap());
    assert_eq!(loop_passes.len(), 3);
    assert!(loop_passes.iter().all(|w| *w >= 0.003), "{loop_passes:?}");
    assert_eq!(site("of loop_body", d.change_ids.last().unwrap()).len(), 1);
}

const LIB: &str = "import time\n\n\ndef work(n):\n    time.sleep(0.001)\n    return n * 2\n\n\nif __name__ == \"__main__\":\n    import sys\n    print(sum(work(i) for i in range(int(sys.argv[1]))))\n";
const ENTRY: &str = "import lib\nprint(sum(lib.work(i) for i in range(7)))\n";

#[test]
fn a_runner_wraps_at_import_time_and_leaves_the_file_alone() {
    let root = Root::new(&[("lib.py", LIB), ("entry.py", ENTRY)]);
    let r = root.instrument("lib.py", Measure::Timing, Strategy::Runner, "work", Some(2));
    assert_eq!(read(&root.file("lib.py")), LIB);
    let id = r.change_ids.last().unwrap().clone();
    let runner = r.run_command[1].clone();
    // The target as __main__, with its arguments.
    let out = root.run(&[&runner, "5"]);
    assert_eq!(out.trim(), "20");
    assert_eq!(summary(&root.records(), &id), (5, 3));
    // Another entry point that imports it; tracebacks and line numbers stay the file's own.
    std::fs::remove_file(root.path.join("profile_output/instrument/measure.jsonl")).unwrap();
    let out = root.run(&[&runner, "--sp-entry", "entry.py"]);
    assert_eq!(out.trim(), "42");
    assert_eq!(summary(&root.records(), &id), (7, 4));
    // A module run as with -m.
    std::fs::remove_file(root.path.join("profile_output/instrument/measure.jsonl")).unwrap();
    let out = root.run(&[&runner, "--sp-module", "lib", "4"]);
    assert_eq!(out.trim(), "12");
    assert_eq!(summary(&root.records(), &id), (4, 2));
    assert!(
        !root.path.join("__pycache__").exists()
            || std::fs::read_dir(root.path.join("__pycache__"))
                .unwrap()
                .count()
                == 0,
        "no bytecode of the wrapped module is cached"
    );
    assert_eq!(read(&root.file("lib.py")), LIB);
}

const TENSORS: &str = r#"import torch

a = torch.randn(1 << 20)
b = a.clone()
zeros1 = torch.zeros(1 << 20)
zeros2 = torch.zeros(1 << 20)
view = a[16:]


def step(x):
    y = x.to(torch.float64)
    z = y.cpu()
    w = torch.empty_like(x)
    w.copy_(x)
    return float(z.sum())


def main():
    for _ in range(3):
        s = step(a)
    assert abs(s - float(a.double().sum())) < 1e-6


main()
"#;

#[test]
fn torch_duplicates_memory_transfers_and_cuda_events_on_the_cpu() {
    let root = Root::new(&[("tensors.py", TENSORS)]);
    if !module(&root.python, "torch") {
        return;
    }
    let dup = root.instrument(
        "tensors.py",
        Measure::Duplicates,
        Strategy::Decorator,
        "main",
        None,
    );
    let mem = root.instrument(
        "tensors.py",
        Measure::Memory,
        Strategy::Decorator,
        "step",
        None,
    );
    let xfer = root.instrument(
        "tensors.py",
        Measure::Transfers,
        Strategy::Decorator,
        "step",
        Some(1),
    );
    let cuda = root.instrument(
        "tensors.py",
        Measure::CudaEvents,
        Strategy::Runner,
        "step",
        None,
    );
    root.run(&["tensors.py"]);
    let recs = root.records();
    std::fs::remove_file(root.path.join(system_profile_instrument::LOG_FILE)).unwrap();
    root.run(&[&cuda.run_command[1]]);
    let cuda_recs = root.records();
    let groups: Vec<_> = recs
        .iter()
        .filter_map(|r| match r {
            R::Duplicates(DuplicatesRecord {
                change,
                groups,
                bytes_duplicated,
                tensors_scanned,
                ..
            }) if change == dup.change_ids.last().unwrap() => {
                Some((groups.clone(), *bytes_duplicated, *tensors_scanned))
            }
            _ => None,
        })
        .collect();
    assert_eq!(groups.len(), 1);
    let (g, total, scanned) = &groups[0];
    // a and its clone: one group of two copies; the zero buffers are not copies of anything,
    // the view shares a's storage.
    assert_eq!(g.len(), 1, "{g:#?}");
    assert_eq!(g[0].shape, vec![1 << 20]);
    assert_eq!(g[0].dtype, "float32");
    assert_eq!(g[0].copies, 2);
    assert_eq!(g[0].bytes_each, 4 << 20);
    assert!(!g[0].cross_device);
    assert_eq!(*total, 4 << 20);
    assert!(*scanned >= 4, "{scanned}");
    let mem_points: Vec<_> = recs
        .iter()
        .filter_map(|r| match r {
            R::Memory(MemoryRecord {
                change,
                point,
                rss_bytes,
                devices,
                ..
            }) if change == mem.change_ids.last().unwrap() => {
                Some((point.clone(), *rss_bytes, devices.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(mem_points.len(), 6);
    assert!(
        mem_points
            .iter()
            .all(|(_, rss, d)| *rss > 50 << 20 && *d == 0),
        "{mem_points:?}"
    );
    // Dtype conversions and CPU copies cross no device: no transfer records, results intact.
    assert!(!recs.iter().any(|r| matches!(r, R::Transfer(TransferRecord { change, .. }) if change == xfer.change_ids.last().unwrap())));
    assert_eq!(summary(&recs, xfer.change_ids.last().unwrap()), (3, 3));
    // Without CUDA the events fall back to wall time, and a note says so once.
    let cuda_id = cuda.change_ids.last().unwrap();
    assert_eq!(
        cuda_recs.iter().filter(|r| matches!(r, R::Note(NoteRecord { change: Some(c), message, .. }) if c == cuda_id && message.contains("CUDA is not available"))).count(),
        1
    );
    assert_eq!(timings(&cuda_recs, cuda_id).len(), 3);
}

const DDP_WORKER: &str = r#"import os, socket, subprocess, sys
import torch
import torch.distributed as dist


def sync(t, out):
    dist.all_reduce(t)
    dist.all_gather(out, t)
    dist.broadcast(t, src=0)
    dist.barrier()
    return t


def worker(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for _ in range(4):
        t = torch.ones(1 << 18) * (rank + 1)
        out = [torch.empty(1 << 18) for _ in range(world)]
        sync(t, out)
        assert float(t[0]) == 3.0, float(t[0])
    dist.destroy_process_group()

"#;

/// The end of both gloo programs: run `worker(rank, 2)` as rank argv[1], or, without one,
/// start two ranks of this file on a free port and exit with the worse status.
const TWO_RANKS_MAIN: &str = r#"

if __name__ == "__main__":
    if len(sys.argv) > 1:
        worker(int(sys.argv[1]), 2)
        sys.exit(0)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    procs = [subprocess.Popen([sys.executable, __file__, str(r)], env=env) for r in range(2)]
    sys.exit(max(p.wait() for p in procs))
"#;

#[test]
fn collectives_on_gloo_over_two_local_processes() {
    let program = format!("{DDP_WORKER}{TWO_RANKS_MAIN}");
    let root = Root::new(&[("ddp.py", &program)]);
    if !module(&root.python, "torch") {
        return;
    }
    let r = root.instrument(
        "ddp.py",
        Measure::Nccl,
        Strategy::Decorator,
        "sync",
        Some(2),
    );
    root.run(&["ddp.py"]);
    let id = r.change_ids.last().unwrap();
    let recs = root.records();
    let coll: Vec<_> = recs
        .iter()
        .filter_map(|r| match r {
            R::Collective(CollectiveRecord {
                change,
                op,
                backend,
                bytes,
                world_size,
                rank,
                latency_s,
                algbw_gbps,
                busbw_gbps,
                ..
            }) if change == id => Some((
                op.clone(),
                backend.clone(),
                *bytes,
                *world_size,
                *rank,
                *latency_s,
                *algbw_gbps,
                *busbw_gbps,
            )),
            _ => None,
        })
        .collect();
    // 4 calls, 1 in 2 sampled, 4 collectives each, on 2 ranks.
    assert_eq!(coll.len(), 2 * 2 * 4, "{coll:?}");
    for rank in 0..2 {
        let ops: Vec<&str> = coll
            .iter()
            .filter(|c| c.4 == rank)
            .map(|c| c.0.as_str())
            .collect();
        assert_eq!(
            ops,
            [
                "all_reduce",
                "all_gather",
                "broadcast",
                "barrier",
                "all_reduce",
                "all_gather",
                "broadcast",
                "barrier"
            ]
        );
    }
    for (op, backend, bytes, world, _, latency, alg, bus) in &coll {
        assert_eq!(backend, "gloo");
        assert_eq!(*world, 2);
        assert!(*latency > 0.0);
        let want = match op.as_str() {
            "all_reduce" | "broadcast" => 1 << 20,
            "all_gather" => 2 << 20,
            _ => 0,
        };
        assert_eq!(*bytes, want, "{op}");
        if *bytes > 0 {
            assert!((alg - *bytes as f64 / latency / 1e9).abs() < 1e-9 * alg.max(1.0));
            let factor = if op == "all_gather" { 0.5 } else { 1.0 };
            assert!(
                (bus - alg * factor).abs() < 1e-9 * alg.max(1.0),
                "{op}: {bus} vs {alg}"
            );
        }
    }
    // One per rank that called it; the launcher defined it and never called it.
    let summaries: Vec<(u64, Option<u32>)> = recs
        .iter()
        .filter_map(|r| match r {
            R::Summary(SummaryRecord {
                change,
                calls,
                rank,
                ..
            }) if change == id => Some((*calls, *rank)),
            _ => None,
        })
        .collect();
    assert_eq!(
        summaries.iter().filter(|(calls, _)| *calls == 4).count(),
        2,
        "{summaries:?}"
    );
    assert_eq!(
        summaries.iter().filter(|(calls, _)| *calls == 0).count(),
        1,
        "{summaries:?}"
    );
}

/// DDP's gradient all-reduces run in its C++ reducer, not through `dist.all_reduce`: 9,352
/// float32 parameters make one bucket of 37,408 bytes, all-reduced once per step.
const DDP_MODEL_WORKER: &str = r#"import os, socket, subprocess, sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train_step(model, opt):
    opt.zero_grad()
    loss = model(torch.randn(32, 64)).pow(2).mean()
    loss.backward()
    opt.step()


def worker(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(4):
        train_step(model, opt)
    dist.destroy_process_group()

"#;

#[test]
fn ddp_buckets_are_collectives_through_a_communication_hook() {
    let program = format!("{DDP_MODEL_WORKER}{TWO_RANKS_MAIN}");
    let root = Root::new(&[("ddp_model.py", &program)]);
    if !module(&root.python, "torch") {
        return;
    }
    let r = root.instrument(
        "ddp_model.py",
        Measure::Nccl,
        Strategy::Decorator,
        "train_step",
        Some(1),
    );
    root.run(&["ddp_model.py"]);
    let id = r.change_ids.last().unwrap();
    let buckets: Vec<(u32, String, u64, Option<u32>)> = root
        .records()
        .iter()
        .filter_map(|r| match r {
            R::Collective(c) if &c.change == id => {
                Some((c.rank, c.op.clone(), c.bytes, c.ddp_bucket))
            }
            _ => None,
        })
        .collect();
    for rank in 0..2 {
        let mine: Vec<_> = buckets.iter().filter(|b| b.0 == rank).collect();
        assert_eq!(
            mine.len(),
            4,
            "one bucket per step on rank {rank}: {buckets:?}"
        );
        assert!(
            mine.iter()
                .all(|b| b.1 == "all_reduce" && b.2 == 9_352 * 4 && b.3 == Some(0)),
            "{buckets:?}"
        );
    }
}
