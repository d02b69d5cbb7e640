//! Each rule on a real scenario where it must fire and one where it must not; the order of
//! the recommendations against the impacts they computed.

use crate::support::{cpu_torch_session, gpu_session, Nccl, Root};
use system_profile_model::report::{Confidence, Recommendation, Report};

fn fired<'a>(r: &'a Report, rule: &str) -> Vec<&'a Recommendation> {
    r.recommendations
        .iter()
        .filter(|x| x.rule == rule)
        .collect()
}

struct Sessions {
    _roots: Vec<Root>,
    cpu: Report,
    cpu_after: Report,
    memory: Report,
    io: Report,
    gpu: Report,
    gpu_socket: Report,
}

fn sessions() -> Sessions {
    let mut roots = Vec::new();
    let mut captured = |name: &str| {
        let root = Root::new();
        let s = root.install(name);
        let r = root.report(&s);
        roots.push(root);
        r
    };
    let (cpu, cpu_after, memory, io) = (
        captured("cpu"),
        captured("cpu-after"),
        captured("memory"),
        captured("io"),
    );
    let root = Root::new();
    let gpu = root.report(&gpu_session(&root, "20261202-gpu-a", Nccl::A100Pcie));
    roots.push(root);
    let root = Root::new();
    let gpu_socket = root.report(&gpu_session(&root, "20261202-gpu-b", Nccl::SocketFallback));
    roots.push(root);
    Sessions {
        _roots: roots,
        cpu,
        cpu_after,
        memory,
        io,
        gpu,
        gpu_socket,
    }
}

#[test]
fn every_rule_fires_where_it_must_and_not_where_it_must_not() {
    let s = sessions();

    // busy() holds ~96% of py-spy's and cProfile's samples; after the fix nothing is hot, and
    // io_wait's poll() is sampled but owns too little of its run's wall time.
    let hot = fired(&s.cpu, "hot_python_function");
    assert_eq!(hot.len(), 1, "{:#?}", s.cpu.recommendations);
    assert!(hot[0].title.contains("`busy`") && hot[0].title.contains("cpu_hotspot.py:12"));
    assert_eq!(hot[0].confidence, Confidence::High, "two profilers agree");
    // cProfile counted 150 calls of busy() (3.90 s own): each call is long, its body the cost.
    assert!(
        hot[0].action.contains("cProfile counted 150 call(s)")
            && hot[0].action.contains("the time is in its body"),
        "{}",
        hot[0].action
    );
    // cProfile's own time of busy() agrees with py-spy's self time: the time is its Python,
    // not a C call's, so no word about native frames.
    assert!(!hot[0].action.contains("native"), "{}", hot[0].action);
    assert!(fired(&s.cpu_after, "hot_python_function").is_empty());
    assert!(s.io.hotspots.is_some());
    assert!(fired(&s.io, "hot_python_function").is_empty());

    // AlexNet's 16 pageable HtoD copies (Kineto names them) and the LM's 294 copies at 3 GB/s
    // (nsys); the 2-rank trace's device-to-device copies are not host copies.
    let copies = fired(&s.gpu, "pageable_or_small_copies");
    let cited: Vec<&str> = copies
        .iter()
        .map(|r| r.sources[0].run_id.as_str())
        .collect();
    assert_eq!(cited, ["r005-nsys", "r004-torch-profiler"], "{copies:#?}");
    assert!(copies
        .iter()
        .all(|r| !r.evidence.iter().any(|e| e.contains("t001"))));
    assert!(fired(&s.cpu, "pageable_or_small_copies").is_empty());

    // Both traces leave the GPU idle (99.5%, 77.2%); the H200 under load in dmon is at 100% SM.
    let idle = fired(&s.gpu, "gpu_idle");
    assert_eq!(idle.len(), 2, "{idle:#?}");
    assert!(idle
        .iter()
        .all(|r| !r.sources[0].run_id.starts_with("r001")));

    // Neither trace nor the nsys run is launch-bound: most kernels run over 10 µs and the
    // LM's launch calls (2.36 s) cost less than its kernels (3.39 s).
    assert!(fired(&s.gpu, "launch_bound").is_empty());

    // The all-reduce trace hides 14.8% of its NCCL time; AlexNet has no communication.
    let comm = fired(&s.gpu, "exposed_communication");
    assert_eq!(comm.len(), 1);
    assert_eq!(comm[0].sources[0].run_id, "t001");

    // DDP over gloo with rank 1 sleeping after each step: rank 0 sits in the collectives
    // waiting for it (221.4 ms against rank 1's 29.0 ms in the traces), so rank 1 is named,
    // once, and what it saves is that difference.
    let late = fired(&s.gpu, "straggler_rank");
    assert_eq!(late.len(), 1, "{late:#?}");
    assert!(late[0].title.starts_with("Rank 1 "), "{}", late[0].title);
    assert_eq!(late[0].sources[0].run_id, "r006-torch-profiler");
    let saved = late[0].gain.time_s.unwrap_or(0.0);
    assert!(
        (0.19..0.195).contains(&saved),
        "rank 0 waited about 192 ms: {saved}"
    );
    for other in [&s.cpu, &s.io, &s.memory] {
        assert!(fired(other, "straggler_rank").is_empty());
    }

    // memory_hog's prepare() keeps a clone of a 32 MiB tensor; the CPU session measured no
    // tensors.
    let dup = fired(&s.memory, "duplicated_tensors");
    assert_eq!(dup.len(), 1);
    assert_eq!(dup[0].gain.memory_bytes, Some(32 << 20));
    assert_eq!(dup[0].confidence, Confidence::High);
    assert!(fired(&s.cpu, "duplicated_tensors").is_empty());

    // io_wait sleeps 94% of the time; cpu_hotspot keeps a core busy.
    let wait = fired(&s.io, "waiting_process");
    assert_eq!(wait.len(), 1);
    assert!(
        wait[0].action.contains("`write`"),
        "names strace's top call"
    );
    assert!(fired(&s.cpu, "waiting_process").is_empty());

    // 120,000 one-byte writes: two thirds of io_wait's CPU is in the kernel; cpu_hotspot was
    // straced too and makes almost no syscalls.
    let sys = fired(&s.io, "syscall_heavy");
    assert_eq!(sys.len(), 1);
    assert!(sys[0].title.contains("`write`"));
    assert!(s.cpu.runs.iter().any(|r| r.run_id == "r008-strace-c"));
    assert!(fired(&s.cpu, "syscall_heavy").is_empty());

    // load_records() holds ~59 MiB of the ~61 MiB Python heap its own code made (the runner
    // imports torch untraced first); io_wait's heap (tracemalloc too) is small.
    // The line is 17, the file's as it stands after revert: instrumented, the helper's import
    // made it 18. memray's run was captured without pymalloc's allocations (its sites are where
    // arenas were requested, not where objects are made): it makes no claim of its own.
    let site = fired(&s.memory, "python_allocation_site");
    assert_eq!(site.len(), 1, "{site:#?}");
    assert!(
        site[0].title.starts_with("memory_hog.py:17 "),
        "{}",
        site[0].title
    );
    assert_eq!(site[0].sources[0].run_id, "r002-tracemalloc");
    assert!(s.memory.runs.iter().any(|r| r.run_id == "r003-memray"));
    assert!(s.io.memory.iter().any(|m| m.heap_peak_bytes.is_some()));
    assert!(fired(&s.io, "python_allocation_site").is_empty());

    // Lightning's demo transformer on the CPU: the output layer over its 13,578-word
    // vocabulary (torch's own table: mm, addmm, _log_softmax and its backward first, 67.9%).
    // The GPU session's traces have kernels, and its gloo ranks spend 80% in all_reduce, a
    // collective, not compute: no operator finding there.
    let root = Root::new();
    let cpu_torch = root.report(&cpu_torch_session(&root, "20261206-cpu-torch"));
    let ops = fired(&cpu_torch, "hot_torch_operators");
    assert_eq!(ops.len(), 1, "{:#?}", cpu_torch.recommendations);
    assert!(
        ops[0].title.contains("dimension of 13578")
            && ["aten::mm", "aten::addmm", "aten::_log_softmax"]
                .iter()
                .all(|o| ops[0].title.contains(o)),
        "{}",
        ops[0].title
    );
    let share = ops[0].gain.wall_percent.unwrap_or(0.0) * 2.0;
    assert!((55.0..=80.0).contains(&share), "{share}");
    assert!(fired(&s.gpu, "hot_torch_operators").is_empty());
    assert!(fired(&s.cpu, "hot_torch_operators").is_empty());

    // The p4d log's NET/Socket fallback; the A100 PCIe box talks P2P.
    let socket = fired(&s.gpu_socket, "nccl_socket_fallback");
    assert_eq!(socket.len(), 1);
    assert!(socket[0].gain.time_s.is_none() && socket[0].impact == 0.0);
    assert!(fired(&s.gpu, "nccl_socket_fallback").is_empty());
}

#[test]
fn recommendations_are_ordered_by_the_impact_they_computed() {
    let s = sessions();
    for (name, r) in [
        ("cpu", &s.cpu),
        ("memory", &s.memory),
        ("io", &s.io),
        ("gpu", &s.gpu),
        ("gpu_socket", &s.gpu_socket),
    ] {
        for rec in &r.recommendations {
            let share = rec
                .gain
                .wall_percent
                .unwrap_or(0.0)
                .max(rec.gain.memory_percent.unwrap_or(0.0))
                / 100.0;
            let weight = match rec.confidence {
                Confidence::High => 1.0,
                Confidence::Medium => 0.6,
                Confidence::Low => 0.3,
            };
            assert!(
                (rec.impact - share * weight).abs() < 1e-12,
                "{name}: {rec:#?}"
            );
            assert!(
                !rec.evidence.is_empty() && !rec.sources.is_empty(),
                "{name}: {rec:#?}"
            );
            assert!(
                rec.gain.time_s.is_some() || rec.gain.memory_bytes.is_some() || rec.impact == 0.0,
                "{name}: a gain or an impact of 0"
            );
        }
        assert!(
            r.recommendations
                .windows(2)
                .all(|w| w[0].impact >= w[1].impact),
            "{name}: {:?}",
            r.recommendations
                .iter()
                .map(|x| x.impact)
                .collect::<Vec<_>>()
        );
    }
    // The GPU session ranks the DDP straggler first (its wait is about 70% of that run's
    // traced window), then the 6.4 s of idle AlexNet GPU, and the tens of ms of pinned copies
    // later.
    let rules: Vec<&str> = s
        .gpu
        .recommendations
        .iter()
        .map(|r| r.rule.as_str())
        .collect();
    assert_eq!(rules[..2], ["straggler_rank", "gpu_idle"], "{rules:?}");
    assert!(s.gpu.recommendations.len() >= 4);
}

/// No capture of several GPUs' memory exists here (every GPU fixture is one device or has no
/// memory column), so this rule is checked on a report built in code: the one rule without a
/// real scenario. The H200 device check (issue 10) should capture one.
#[test]
fn gpu_memory_imbalance_on_a_constructed_report() {
    use system_profile_model::report::{Lang, MemoryRow};
    use system_profile_report::rules::{recommend, Inputs};
    let root = Root::new();
    let s = root.install("io");
    let session = system_profile_report::session::load(root.path(), &s, &[]).unwrap();
    let row = |place: &str, peak: u64| MemoryRow {
        run_id: "instrument".into(),
        place: place.into(),
        gpu_peak_allocated_bytes: Some(peak),
        ..MemoryRow::default()
    };
    let mut report = Report {
        memory: vec![row("cuda:0", 60 << 30), row("cuda:1", 40 << 30)],
        ..Report::default()
    };
    let recs = recommend(&Inputs {
        session: &session,
        report: &report,
        lang: Lang::En,
    });
    let r: Vec<_> = recs
        .iter()
        .filter(|r| r.rule == "gpu_memory_imbalance")
        .collect();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].gain.memory_bytes, Some(10 << 30));
    report.memory = vec![row("cuda:0", 50 << 30), row("cuda:1", 45 << 30)];
    let recs = recommend(&Inputs {
        session: &session,
        report: &report,
        lang: Lang::En,
    });
    assert!(recs.iter().all(|r| r.rule != "gpu_memory_imbalance"));
}

/// A torch.profiler run that traced a window of steps and ended the program: the operators'
/// share of the window is carried to the program's wall after start-up (the measure run's),
/// the disturbance is a traced step against an unprofiled one of the same run, and the runs
/// table says the run was ended.
#[test]
fn a_window_of_steps_speaks_for_the_program_after_its_start_up() {
    use system_profile_model::metrics::StepWindow;
    use system_profile_model::metrics::TimeV;
    use system_profile_model::run::{AfterTrace, Method, RunList, RunMetrics};
    let root = Root::new();
    let name = "20261207-window";
    cpu_torch_session(&root, name);
    let manifest = root
        .path()
        .join("profile_output")
        .join(name)
        .join("manifest.json");
    let base: RunList = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let trace = base.runs[0].metrics.trace.clone().unwrap();
    let first = &trace.cpu_ops[0];
    let ops_s = first.self_us * 100.0 / first.self_percent / 1e6;
    let with_window = |traced_step_s: f64| {
        let mut list = base.clone();
        let torch = &mut list.runs[0];
        // Operators 90% of three traced steps; start-up 2 s; two unprofiled steps after.
        let unprofiled_step_s = ops_s / 0.9 / 3.0;
        torch.metrics.step_window = Some(StepWindow {
            first_traced_step: 5,
            last_traced_step: 7,
            steps_seen: 9,
            start_s: 2.0,
            unprofiled_step_s: Some(unprofiled_step_s),
            traced_step_s: Some(traced_step_s),
            after_trace: AfterTrace::EndProgram,
        });
        torch.wall_s = Some(2.0 + 8.0 * unprofiled_step_s);
        // The program alone (measure): 20 s, of which 18 s after start-up.
        let mut measure = crate::support::record(
            "r002-measure",
            Method::Measure,
            RunMetrics {
                time_v: Some(TimeV {
                    wall_s: 20.0,
                    ..TimeV::default()
                }),
                ..RunMetrics::default()
            },
            Vec::new(),
        );
        measure.wall_s = Some(20.0);
        list.runs.push(measure);
        std::fs::write(&manifest, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
        root.summarize(name, system_profile_model::report::Lang::En)
    };

    let out = with_window(ops_s / 0.9 / 3.0);
    let ops = fired(&out.report, "hot_torch_operators");
    assert_eq!(ops.len(), 1, "{:#?}", out.report.recommendations);
    let share: f64 = ops[0]
        .title
        .split(" take ")
        .nth(1)
        .and_then(|t| t.split('%').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    let expected_s = 0.5 * share / 100.0 * 0.9 * 18.0;
    let gain_s = ops[0].gain.time_s.unwrap();
    assert!(
        (gain_s - expected_s).abs() < 0.01 * expected_s,
        "{gain_s} against {expected_s}"
    );
    assert!(ops[0].action.contains("steps 5-7"), "{}", ops[0].action);
    assert!(
        out.markdown.contains("(ended after step 9: a window)")
            && out.markdown.contains("The trace holds steps 5-7")
            && out.markdown.contains("1.00×"),
        "{}",
        out.markdown
    );

    // Traced steps three times the unprofiled ones: the shares are the disturbance's.
    let out = with_window(3.0 * ops_s / 0.9 / 3.0);
    assert!(fired(&out.report, "hot_torch_operators").is_empty());
    assert!(
        out.markdown
            .contains("A traced step took 3.0× an unprofiled step of the same run"),
        "{}",
        out.markdown
    );
}
