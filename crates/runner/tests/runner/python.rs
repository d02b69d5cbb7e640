use super::*;
use std::time::Duration;
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::{ProfilerOptions, RunProfilerInput, RunStatus};
use system_profile_runner::execute;

#[tokio::test]
async fn py_spy_ranks_the_hot_function_first_and_draws_it() {
    if !tool("py-spy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let hot = script(dir.path(), "hot.py", &hot_for_a_cpu_second());
    let mut i = input(Method::PySpyRecord, command(&[&py, &hot]));
    i.options.rate_hz = Some(250.0);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let s = e.metrics.stacks.as_ref().unwrap();
    assert!(s.total_samples > 20, "{s:?}");
    assert_eq!(s.by_self[0].function, "hot", "{:?}", &s.by_self[..3]);
    assert!(s.by_self[0].file.as_deref().unwrap().ends_with("hot.py"));
    let svg = e
        .artifacts
        .iter()
        .find(|a| a.kind == ArtifactKind::FlamegraphSvg)
        .expect("a flame graph");
    let text = std::fs::read_to_string(&svg.path).unwrap();
    assert!(
        text.contains("<svg") && text.contains("hot"),
        "not a flame graph of hot()"
    );

    // Attach to a running process for one second.
    let spin = script(
        dir.path(),
        "spin.py",
        "def spin():\n    x = 0\n    while True:\n        x += 1\n\nspin()\n",
    );
    let mut child = Command::new(&py).arg(&spin).spawn().unwrap();
    let mut i = input(Method::PySpyRecord, RunTarget::Pid { pid: child.id() });
    i.duration_s = Some(1.0);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    if e.status == RunStatus::Failed {
        assert!(
            e.error.as_deref().unwrap().contains("ptrace_scope"),
            "{e:?}"
        );
        return;
    }
    let s = e.metrics.stacks.as_ref().unwrap();
    assert_eq!(s.by_self[0].function, "spin", "{:?}", s.by_self);
    assert!(e.argv.contains(&"--pid".to_string()));
}

/// py-spy exits 0 whatever its target did: a target that ran Python for a while and then
/// failed is a failed run, with the target's status and last words, and the samples kept.
#[tokio::test]
async fn py_spy_keeps_the_status_of_a_target_that_fails() {
    if !tool("py-spy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let failing = script(
        dir.path(),
        "fails late.py",
        "x = 0\nfor i in range(20_000_000):\n    x += i\nraise SystemExit('the input file is bad')\n",
    );
    let i = input(Method::PySpyRecord, command(&[&py, &failing]));
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Failed, "expected failed, came {e:?}");
    assert_eq!(e.exit_code, Some(1), "{e:?}");
    let error = e.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("status 1") && error.contains("the input file is bad"),
        "expected the target's status and last words, came {error:?}"
    );
    let s = e.metrics.stacks.as_ref().unwrap();
    assert!(s.total_samples > 0, "the samples are kept: {s:?}");
    assert!(
        s.by_self
            .iter()
            .all(|f| !f.function.starts_with("process ")),
        "no process marker is a function: {:?}",
        s.by_self
    );

    // A target that succeeds is still a completed run.
    let fine = script(
        dir.path(),
        "fine.py",
        "import time\nx = 0\nwhile time.process_time() < 0.5:\n    x += 1\n",
    );
    let i = input(Method::PySpyRecord, command(&[&py, &fine]));
    let e = execute(&i, &place(&dir.path().join("fine"))).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert_eq!(e.exit_code, Some(0));

    // A target that ends before py-spy can read it: nothing measured, and py-spy's failure is
    // not passed off as the target's ("the target exited with status 1").
    let quick = script(dir.path(), "quick.py", "print('done')\n");
    let i = input(Method::PySpyRecord, command(&[&py, &quick]));
    let e = execute(&i, &place(&dir.path().join("quick")))
        .await
        .unwrap();
    let error = e.error.as_deref().unwrap_or_default();
    // A busy machine slows the program enough for py-spy to catch it: then what it sampled is
    // a completed run with its stacks, never a failure passed off as the target's.
    if e.metrics
        .stacks
        .as_ref()
        .is_some_and(|s| s.total_samples > 0)
    {
        assert_eq!(e.status, RunStatus::Completed, "{e:?}");
        assert_eq!(e.exit_code, Some(0));
        assert!(e.not_started.is_none() && e.error.is_none(), "{e:?}");
        return;
    }
    assert_eq!(e.status, RunStatus::Failed, "{e:?}");
    assert_eq!(
        e.error_kind,
        Some(system_profile_runner::RunErrorKind::MissedTarget)
    );
    // Ended before py-spy read it (status 0 kept), or, on a busy machine, py-spy gave up on
    // it before its interpreter was loaded: either way missed, never the target's failure.
    assert!(
        error.contains("before py-spy found its Python interpreter")
            && !error.contains("exited with status"),
        "expected the target's quick end as the reason, came {error:?}"
    );
}

#[tokio::test]
async fn py_spy_dump_shows_where_each_thread_is() {
    if !tool("py-spy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let waiter = script(
        dir.path(),
        "wait.py",
        "import time\n\ndef waiting():\n    time.sleep(60)\n\nwaiting()\n",
    );
    let mut child = Command::new(&py).arg(&waiter).spawn().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let e = execute(
        &input(Method::PySpyDump, RunTarget::Pid { pid: child.id() }),
        &place(dir.path()),
    )
    .await
    .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    if e.status == RunStatus::Failed {
        assert!(e.error.is_some(), "{e:?}");
        return;
    }
    let threads = e.metrics.threads.as_ref().unwrap();
    assert_eq!(threads[0].pid, child.id());
    assert_eq!(threads[0].frames[0].function, "waiting", "{threads:?}");
    assert!(!threads[0].active, "a sleeping thread is idle");
}

#[tokio::test]
async fn cprofile_counts_every_call_and_ranks_by_own_time() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let hot = script(dir.path(), "hot.py", HOT);
    let e = execute(
        &input(Method::Cprofile, command(&[&py, "-u", &hot])),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert_eq!(e.argv[1..4], ["-u", "-c", "<cprofile runner>"]);
    let c = e.metrics.calls.as_ref().unwrap();
    let top = &c.by_tottime[0];
    assert_eq!(top.function, "hot", "{:?}", &c.by_tottime[..3]);
    assert_eq!(top.calls, 30);
    let cold = c.by_tottime.iter().find(|f| f.function == "cold").unwrap();
    assert_eq!(cold.calls, 30);
    assert!(top.tottime_s > cold.tottime_s);
    let err = execute(
        &input(Method::Cprofile, command(&["/bin/true"])),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("must start with the interpreter"));

    // A target that exits with an error is a failed run with its words (`python -m cProfile`
    // exits 0 and drops them), and what it ran until then is still counted.
    let broken = script(
        dir.path(),
        "broken.py",
        "def setup():\n    return None\n\nsetup()\nraise SystemExit('broken.py cannot start: no config given')\n",
    );
    let e = execute(
        &input(Method::Cprofile, command(&[&py, &broken])),
        &place(&dir.path().join("broken")),
    )
    .await
    .unwrap();
    assert_eq!(
        (e.status, e.exit_code),
        (RunStatus::Failed, Some(1)),
        "{e:?}"
    );
    assert!(
        e.error
            .as_deref()
            .is_some_and(|m| m.contains("no config given")),
        "expected the target's words, came {:?}",
        e.error
    );
    let c = e.metrics.calls.as_ref().expect("the calls until the exit");
    assert!(
        c.by_tottime
            .iter()
            .any(|f| f.function == "setup" && f.calls == 1),
        "{c:?}"
    );
}

#[tokio::test]
async fn line_profiler_times_each_line_of_the_named_function() {
    let py = python();
    if !module(&py, "line_profiler") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hot = script(dir.path(), "hot.py", HOT);
    let mut i = input(Method::LineProfiler, command(&[&py, &hot]));
    i.options.function = Some(format!("{hot}:hot"));
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let p = e.metrics.line_profile.as_ref().expect("a line profile");
    assert_eq!(p.function, "hot");
    // `t += i * i` (line 5) runs 30 x 100000 times and takes most of the time.
    let body = p.lines.iter().find(|l| l.line == 5).unwrap();
    assert_eq!(body.hits, 3_000_000, "{p:?}");
    assert!(body.source.contains("t += i * i"));
    assert!(body.percent > 40.0, "{body:?}");
    let first = p.lines.iter().find(|l| l.line == 3).unwrap();
    assert_eq!(first.hits, 30);
    let err = execute(
        &input(Method::LineProfiler, command(&[&py, &hot])),
        &place(dir.path()),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("options.function"));
}

/// Holds 40 MB from line 4 for 0.3 s at its peak, frees it, then keeps 5 MB from line 9 to
/// the end.
const ALLOC: &str = r#"import sys, time

def build():
    big = [bytes(1000) for _ in range(40_000)]
    time.sleep(0.3)
    return sum(len(b) for b in big)

def keep():
    return [bytes(500) for _ in range(10_000)]

total = build()
kept = keep()
print(total, len(kept), file=sys.stderr)
"#;

#[tokio::test]
async fn tracemalloc_finds_the_site_of_the_peak_and_what_stays() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let alloc = script(dir.path(), "alloc.py", ALLOC);
    let mut i = input(Method::Tracemalloc, command(&[&py, &alloc]));
    i.options.interval_s = Some(0.01);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(
        e.stderr_tail.starts_with("40000000 10000"),
        "the target ran as itself: {}",
        e.stderr_tail
    );
    let m = e.metrics.python_memory.as_ref().unwrap();
    // 40,000 bytes objects of 1000 bytes (+33 bytes header each) and the list: the program's
    // own count is 40 MB of payload; the peak is that within 10% plus what else lived then.
    let payload = 40_000_000.0;
    assert!(
        (m.peak_bytes as f64) > payload && (m.peak_bytes as f64) < payload * 1.15,
        "peak {}",
        m.peak_bytes
    );
    let at_peak = &m.peak_sites_by_size[0];
    assert!(
        at_peak.file.ends_with("alloc.py") && at_peak.line == 4,
        "{at_peak:?}"
    );
    assert!(
        (at_peak.size_bytes as f64 - payload).abs() < payload * 0.1,
        "{at_peak:?}"
    );
    let at_exit = &m.exit_sites_by_size[0];
    assert!(
        at_exit.file.ends_with("alloc.py") && at_exit.line == 9,
        "{at_exit:?}"
    );
    assert!(
        m.peak_sites_at_bytes as f64 > payload,
        "{}",
        m.peak_sites_at_bytes
    );
    // 10,000 bytes objects, their list and the comprehension's own blocks.
    assert!((10_000..10_010).contains(&at_exit.count), "{at_exit:?}");
    assert!(!m.timeline.is_empty());
    assert!(e.argv.contains(&"<tracemalloc runner>".to_string()));
}

/// Leading imports (one in a `try`), then code, then a later import that must stay where it is.
const IMPORTS: &str = r#""""Leading imports, then code."""
import sys
import csv
try:
    import xml.dom.minidom
except ImportError:
    xml = None
from email import message
print("decimal" in sys.modules, file=sys.stderr)
import decimal
held = [bytes(100) for _ in range(100_000)]
"#;

#[tokio::test]
async fn tracemalloc_imports_the_leading_imports_untraced_and_weighs_each() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let script_path = script(dir.path(), "imports.py", IMPORTS);
    let e = execute(
        &input(Method::Tracemalloc, command(&[&py, &script_path])),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    // The import after the first statement ran where the program put it, not ahead.
    assert!(e.stderr_tail.starts_with("False"), "{}", e.stderr_tail);
    let m = e.metrics.python_memory.as_ref().unwrap();
    let names: Vec<&str> = m.imports.iter().map(|i| i.module.as_str()).collect();
    assert_eq!(names, ["sys", "csv", "xml.dom.minidom", "email"], "{m:?}");
    let before = m
        .rss_before_imports_bytes
        .expect("the interpreter's resident set");
    assert!(before > 1 << 20, "{before}");
    let mut last = before;
    for i in &m.imports {
        assert!(i.error.is_none(), "{i:?}");
        assert!(i.rss_after_bytes >= last / 2, "{i:?} after {last}");
        last = i.rss_after_bytes;
    }
    // What the imports allocated is not the program's: no stdlib module's line among the
    // sites, and the program's list is the first.
    let top = &m.peak_sites_by_size[0];
    assert!(
        top.file.ends_with("imports.py") && top.line == 11,
        "{top:?}"
    );
    for s in &m.peak_sites_by_size {
        assert!(
            !s.file.contains("/xml/") && !s.file.contains("/email/") && !s.file.contains("/csv"),
            "an import's allocation was traced: {s:?}"
        );
    }
}

/// Line 3 makes 200,000 small objects (a tuple, a string and two ints each, about 30 MB in
/// all, each freed at once); line 6 one 5 MB buffer. pymalloc serves line 3 from a few arenas it
/// reuses: only with its allocations counted does memray put line 3 first. What is live at the
/// peak is line 6's buffer: the churn of line 3 was freed as it went.
const CHURN: &str = r#"def churn():
    for i in range(200_000):
        t = (i, i + 100_000, str(i))

def big():
    return bytes(5_000_000)

churn()
b = big()
"#;

#[tokio::test]
async fn memray_counts_small_python_objects_where_they_are_made() {
    let py = python();
    if !module(&py, "memray") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let churn = script(dir.path(), "churn.py", CHURN);
    let top_line = |options: ProfilerOptions| {
        let dir = dir.path().join(format!(
            "{:?}-{:?}",
            options.python_allocators, options.leaks
        ));
        let input = RunProfilerInput {
            options,
            ..input(Method::Memray, command(&[&py, &churn]))
        };
        async move {
            let e = execute(&input, &place(&dir)).await.unwrap();
            assert_eq!(e.status, RunStatus::Completed, "{e:?}");
            let m = e.metrics.allocations.clone().expect("memray stats");
            let own = m
                .top_by_size
                .iter()
                .find(|s| s.file.ends_with("churn.py"))
                .cloned()
                .unwrap();
            let held = m
                .at_peak
                .iter()
                .find(|s| s.file.ends_with("churn.py"))
                .map(|s| (s.line, s.live_bytes));
            let kept = m
                .not_freed
                .iter()
                .find(|s| s.file.ends_with("churn.py"))
                .map(|s| (s.line, s.live_bytes));
            let leaks_csv = e
                .artifacts
                .iter()
                .any(|a| a.kind == ArtifactKind::MemrayLeaksCsv);
            assert_eq!(kept.is_some(), leaks_csv, "{:?}", e.artifacts);
            (own.line, m.traces_python_allocators, e.argv, held, kept)
        }
    };
    // Asked for (`leaks`): the buffer `b` keeps to the end is still allocated at exit, by the
    // line that made it; the churn was freed.
    let (_, _, _, _, kept) = top_line(ProfilerOptions {
        leaks: Some(true),
        ..Default::default()
    })
    .await;
    let (kept_line, kept_bytes) = kept.expect("what was not freed at exit");
    assert_eq!(kept_line, Some(6));
    assert!((5_000_000..5_100_000).contains(&kept_bytes), "{kept_bytes}");
    let (line, traced, argv, held, kept) = top_line(ProfilerOptions::default()).await;
    assert!(kept.is_none(), "no leak view unless asked");
    assert!(traced && argv.iter().any(|a| a == "--trace-python-allocators"));
    assert_eq!(line, Some(3));
    let (held_line, held_bytes) = held.expect("what was live at the peak");
    assert_eq!(
        held_line,
        Some(6),
        "live at the peak: the buffer, not the churn"
    );
    assert!((5_000_000..5_100_000).contains(&held_bytes), "{held_bytes}");
    let (line, traced, _, _, _) = top_line(ProfilerOptions {
        python_allocators: Some(false),
        ..Default::default()
    })
    .await;
    assert!(!traced);
    assert_eq!(line, Some(6), "arenas only: the 5 MB buffer ranks first");
}

#[tokio::test]
async fn memray_draws_its_flame_graph_over_time_or_leaves_a_pass_out_when_asked() {
    let py = python();
    if !module(&py, "memray") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let churn = script(dir.path(), "churn.py", CHURN);
    let mut pages = Vec::new();
    for temporal in [None, Some(true)] {
        let input = RunProfilerInput {
            options: ProfilerOptions {
                temporal,
                ..Default::default()
            },
            ..input(Method::Memray, command(&[&py, &churn]))
        };
        let e = execute(&input, &place(&dir.path().join(format!("{temporal:?}"))))
            .await
            .unwrap();
        assert_eq!(e.status, RunStatus::Completed, "{e:?}");
        let html = e
            .artifacts
            .iter()
            .find(|a| a.kind == ArtifactKind::MemrayFlamegraphHtml)
            .expect("a flame graph for a small capture");
        pages.push(std::fs::read_to_string(&html.path).unwrap());
    }
    // The page over time carries the allocations' time intervals (its slider's data); the
    // peak's page does not.
    assert!(!pages[0].contains("\"intervals\":["));
    assert!(pages[1].contains("\"intervals\":["));

    // Without the short-lived pass: no such CSV, and the run says what it cannot report.
    let input = RunProfilerInput {
        options: ProfilerOptions {
            short_lived: Some(false),
            ..Default::default()
        },
        ..input(Method::Memray, command(&[&py, &churn]))
    };
    let e = execute(&input, &place(&dir.path().join("no-short-lived")))
        .await
        .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(!e
        .artifacts
        .iter()
        .any(|a| a.kind == ArtifactKind::MemrayShortLivedCsv));
    assert!(
        e.warnings
            .iter()
            .any(|w| w.contains("options.short_lived: false")),
        "{:?}",
        e.warnings
    );
    assert!(e.metrics.allocations.is_some_and(|a| !a.at_peak.is_empty()));
}

#[tokio::test]
async fn memray_finds_where_the_bytes_go_and_the_peak() {
    let py = python();
    if !module(&py, "memray") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let alloc = script(dir.path(), "alloc.py", ALLOC);
    let e = execute(
        &input(Method::Memray, command(&[&py, &alloc])),
        &place(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    let m = e.metrics.allocations.as_ref().expect("memray stats");
    let payload = 40_000_000.0;
    assert!(
        (m.peak_bytes as f64 - payload).abs() < payload * 0.1,
        "peak {}",
        m.peak_bytes
    );
    let top = &m.top_by_size[0];
    assert!(
        top.file.ends_with("alloc.py") && top.line == Some(4),
        "{top:?}"
    );
    assert!(m.top_by_count[0].count.unwrap() >= 40_000);
    assert!(m.total_allocations >= 50_000);
    for kind in [
        ArtifactKind::MemrayBin,
        ArtifactKind::MemrayStatsJson,
        ArtifactKind::MemrayFlamegraphHtml,
    ] {
        assert!(
            e.artifacts.iter().any(|a| a.kind == kind),
            "{kind:?}: {:?}",
            e.artifacts
        );
    }
}

/// `grow` holds 64 MiB from its line 5 for as long as it runs and frees it on line 7; the
/// rest of the program is not traced.
const GROW: &str = r#"import sys

def grow(n):
    keep = []
    keep.append(bytearray(64 * 1024 * 1024))
    total = sum(len(b) for b in keep)
    del keep
    return total

class Box:
    def small(self):
        return [0] * 10

print(grow(1), Box().small()[0])
"#;

#[tokio::test]
async fn memory_profiler_finds_the_line_that_grows_memory() {
    let py = python();
    if !module(&py, "memory_profiler") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let grow = script(dir.path(), "grow.py", GROW);
    let mut i = input(Method::MemoryProfiler, command(&[&py, &grow]));
    i.options.function = Some("grow.py:grow".into());
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(
        e.stdout_tail.starts_with("67108864 0"),
        "the program ran as usual: {e:?}"
    );
    let m = e.metrics.memory_lines.as_ref().expect("a memory profile");
    assert_eq!(m.function, "grow");
    assert_eq!(m.top_increment_line, Some(5), "{m:?}");
    let alloc = m.lines.iter().find(|l| l.line == 5).unwrap();
    assert!(alloc.source.contains("bytearray(64 * 1024 * 1024)"));
    assert_eq!(alloc.occurrences, 1);
    // 64 MiB resident, give or take what the interpreter does around it.
    let inc = alloc.increment_mib.unwrap();
    assert!((60.0..70.0).contains(&inc), "{alloc:?}");
    let freed = m.lines.iter().find(|l| l.line == 7).unwrap();
    assert!(freed.increment_mib.unwrap() < -60.0, "{freed:?}");
    // A method by its qualified name.
    let mut i = input(Method::MemoryProfiler, command(&[&py, &grow]));
    i.options.function = Some("grow.py:Box.small".into());
    let e = execute(&i, &place(dir.path())).await.unwrap();
    let m = e.metrics.memory_lines.as_ref().unwrap();
    assert_eq!(
        m.lines.iter().find(|l| l.line == 12).unwrap().occurrences,
        1,
        "{m:?}"
    );
}

/// A small training loop: six optimizer steps of a linear model on the CPU.
const TRAIN: &str = r#"import torch
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(32, 64)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
"#;

#[tokio::test]
async fn torch_profiler_traces_a_training_loop_on_its_schedule() {
    let py = python();
    if !module(&py, "torch") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let train = script(dir.path(), "train.py", TRAIN);
    let mut i = input(Method::TorchProfiler, command(&[&py, &train]));
    i.options.schedule = Some(system_profile_model::run::TorchSchedule {
        wait: 1,
        warmup: 1,
        active: 2,
        repeat: 1,
        after_trace: Default::default(),
    });
    i.options.record_shapes = Some(true);
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(e.stdout_tail.contains("trained"));
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("run/torch-profiler.json")).unwrap(),
    )
    .unwrap();
    // Every optimizer step was seen; one active cycle of two steps was exported.
    assert_eq!(state["steps"], 6, "{state}");
    assert_eq!(state["traces"].as_array().unwrap().len(), 1, "{state}");
    let t = e.metrics.trace.as_ref().expect("the trace analysed");
    assert!(t.events > 50, "{t:?}");
    // Two ProfilerStep annotations in the active cycle.
    assert_eq!(t.window.profiler_steps, 2, "{:?}", t.window);
    if state["cuda"] == false {
        assert!(
            e.warnings.iter().any(|w| w.contains("no GPU")),
            "{:?}",
            e.warnings
        );
    }
    assert!(e
        .artifacts
        .iter()
        .any(|a| a.kind == ArtifactKind::KinetoTrace));

    // Without a schedule the whole run is one trace.
    let e = execute(
        &input(Method::TorchProfiler, command(&[&py, &train])),
        &place(&dir.path().join("whole")),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(e.metrics.trace.as_ref().unwrap().events > 100);

    // A hand-written update steps no optimizer: the profiler steps at each backward instead.
    let manual = script(
        dir.path(),
        "manual.py",
        &TRAIN
            .replace("opt = torch.optim.SGD(model.parameters(), lr=0.01)\n", "")
            .replace("    opt.zero_grad()\n", "")
            .replace(
                "    opt.step()\n",
                "    with torch.no_grad():\n        for p in model.parameters():\n            p -= 0.01 * p.grad\n            p.grad = None\n",
            ),
    );
    let schedule = system_profile_model::run::TorchSchedule {
        wait: 1,
        warmup: 1,
        active: 2,
        repeat: 1,
        after_trace: Default::default(),
    };
    let mut i = input(Method::TorchProfiler, command(&[&py, &manual]));
    i.options.schedule = Some(schedule);
    let at = dir.path().join("manual");
    let e = execute(&i, &place(&at)).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(at.join("run/torch-profiler.json")).unwrap())
            .unwrap();
    assert_eq!(state["step_by"], "backward", "{state}");
    assert!(
        e.metrics.trace.as_ref().is_some_and(|t| t.events > 0),
        "{e:?}"
    );

    // Inference (no backward): each outermost forward of a torch.nn.Module is a step, from
    // the second (the first might be a training iteration's, before its optimizer step).
    let infer = script(
        dir.path(),
        "infer.py",
        "import torch\nmodel = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())\nwith torch.no_grad():\n    for _ in range(6):\n        model(torch.randn(32, 64))\nprint(\"inferred\")\n",
    );
    let mut i = input(Method::TorchProfiler, command(&[&py, &infer]));
    i.options.schedule = Some(schedule);
    let at = dir.path().join("infer");
    let e = execute(&i, &place(&at)).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(at.join("run/torch-profiler.json")).unwrap())
            .unwrap();
    assert_eq!(
        (state["step_by"].as_str(), state["steps"].as_u64()),
        (Some("forward"), Some(5)),
        "{state}"
    );

    // No module, no backward, no optimizer: the schedule never starts, nothing is traced,
    // and the run says so instead of passing for a profile.
    let bare = script(
        dir.path(),
        "bare.py",
        "import torch\nx = torch.randn(256, 256)\nfor _ in range(6):\n    x = (x @ x).tanh()\nprint(\"trained\")\n",
    );
    let mut i = input(Method::TorchProfiler, command(&[&py, &bare]));
    i.options.schedule = Some(schedule);
    let e = execute(&i, &place(&dir.path().join("bare"))).await.unwrap();
    assert!(e.stdout_tail.contains("trained"), "{e:?}");
    assert_eq!(e.status, RunStatus::Failed, "{e:?}");
    assert!(
        e.error.as_deref().unwrap_or("").contains("made no step"),
        "{:?}",
        e.error
    );
    assert!(e.metrics.trace.is_none());
}

#[tokio::test]
async fn torch_profiler_ends_a_training_once_its_window_is_traced() {
    let py = python();
    if !module(&py, "torch") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A long loop whose own handler would swallow an exception: the end must not depend on
    // the program letting one through.
    let long = TRAIN
        .replace(
            "for step in range(6):",
            "try:\n  for step in range(100000):",
        )
        .replace("\n    ", "\n      ")
        .replace(
            "print(\"trained\")",
            "except BaseException:\n  print(\"caught\")\nprint(\"trained\")",
        );
    let train = script(dir.path(), "train.py", &long);
    let mut i = input(Method::TorchProfiler, command(&[&py, &train]));
    i.options.schedule = Some(system_profile_model::run::TorchSchedule {
        wait: 3,
        warmup: 1,
        active: 2,
        repeat: 1,
        after_trace: system_profile_model::run::AfterTrace::EndProgram,
    });
    let e = execute(&i, &place(dir.path())).await.unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert_eq!(e.exit_code, Some(0), "{e:?}");
    assert!(
        !e.stdout_tail.contains("trained") && !e.stdout_tail.contains("caught"),
        "{:?}",
        e.stdout_tail
    );
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("run/torch-profiler.json")).unwrap(),
    )
    .unwrap();
    // Two steps after the window, timed without the profiler, then the end.
    assert_eq!(
        (state["steps"].as_u64(), state["ended_after_step"].as_u64()),
        (Some(8), Some(8)),
        "{state}"
    );
    let w = e.metrics.step_window.as_ref().expect("the window");
    assert_eq!(
        (w.first_traced_step, w.last_traced_step, w.steps_seen),
        (5, 6, 8),
        "{w:?}"
    );
    assert!(!w.after_trace.is_run_on(), "{w:?}");
    assert!(w.unprofiled_step_s.is_some_and(|s| s > 0.0), "{w:?}");
    assert!(w.traced_step_s.is_some_and(|s| s > 0.0), "{w:?}");
    assert!(w.start_s > 0.0, "{w:?}");
    assert_eq!(e.metrics.trace.as_ref().unwrap().window.profiler_steps, 2);
    assert!(
        e.warnings.iter().any(|m| m.contains("ended after step 8")),
        "{:?}",
        e.warnings
    );
}
