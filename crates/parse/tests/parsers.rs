//! Parsers on real captured outputs (tests/data/<format>/<case>.txt, each with a .source.md),
//! with snapshot results and the facts a reader can check by eye.

use std::path::{Path, PathBuf};
use system_profile_model::topology::{LinkKind, TopoDeviceKind};
use system_profile_parse::nvidia_smi_topo;

#[path = "parsers/alloc_samples.rs"]
mod alloc_samples;
#[path = "parsers/kineto.rs"]
mod kineto;
#[path = "parsers/mutated.rs"]
mod mutated;
#[path = "parsers/serving.rs"]
mod serving;

fn data_dir(format: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format)
}

fn fixture(format: &str, case: &str) -> String {
    let path = data_dir(format).join(format!("{case}.txt"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn cases(format: &str) -> Vec<String> {
    let mut cases: Vec<String> = std::fs::read_dir(data_dir(format))
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".txt").map(str::to_string)
        })
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_topo_fixture_has_a_source_and_a_snapshot() {
    let cases = cases("nvidia_smi_topo");
    assert_eq!(cases.len(), 6);
    for case in cases {
        assert!(
            data_dir("nvidia_smi_topo")
                .join(format!("{case}.source.md"))
                .exists(),
            "{case} has no .source.md"
        );
        let parsed = nvidia_smi_topo::parse(&fixture("nvidia_smi_topo", &case));
        assert!(
            parsed.diagnostics.is_empty(),
            "{case}: {:?}",
            parsed.diagnostics
        );
        insta::with_settings!({snapshot_suffix => case.clone()}, {
            insta::assert_json_snapshot!("nvidia_smi_topo", parsed.value);
        });
    }
}

#[test]
fn dgx_nv18_with_thirteen_nics() {
    let t = nvidia_smi_topo::parse(&fixture("nvidia_smi_topo", "dgx-8gpu-nv18-13nic-mlx5")).value;
    let gpus = t
        .devices
        .iter()
        .filter(|d| d.kind == TopoDeviceKind::Gpu)
        .count();
    let nics: Vec<_> = t
        .devices
        .iter()
        .filter(|d| d.kind == TopoDeviceKind::Nic)
        .collect();
    assert_eq!(gpus, 8);
    assert_eq!(nics.len(), 13);
    assert_eq!(nics[0].name.as_deref(), Some("mlx5_ib0"));
    assert_eq!(nics[12].name.as_deref(), Some("mlx5_eth4"));
    assert_eq!(t.nvlink_gpu_pairs, 28);
    assert!(t.pcie_gpu_pairs.is_empty());
    assert_eq!(t.links[0][1].nvlink_count, Some(18));
    assert_eq!(t.links[0][8].kind, LinkKind::Pix);
    assert_eq!(t.devices[4].cpu_affinity.as_deref(), Some("56-111,168-223"));
    assert_eq!(t.devices[4].numa_affinity.as_deref(), Some("1"));
    assert_eq!(t.devices[4].gpu_numa_id.as_deref(), Some("N/A"));
}

#[test]
fn pcie_only_box_flags_every_pair() {
    let t = nvidia_smi_topo::parse(&fixture("nvidia_smi_topo", "pcie-8gpu-all-sys-2numa")).value;
    assert_eq!(t.nvlink_gpu_pairs, 0);
    assert_eq!(t.pcie_gpu_pairs.len(), 28);
    assert!(t.pcie_gpu_pairs.iter().all(|p| p.link == LinkKind::Sys));
    assert_eq!(t.devices[7].cpu_affinity.as_deref(), Some("16-31,48-63"));
}

#[test]
fn single_gpu_vm_with_ansi_underline() {
    let t = nvidia_smi_topo::parse(&fixture("nvidia_smi_topo", "h100-1gpu-vm-raw-ansi")).value;
    assert_eq!(t.devices.len(), 1);
    assert_eq!(t.links[0][0].kind, LinkKind::SelfLink);
    assert_eq!(t.devices[0].cpu_affinity.as_deref(), Some("0-19"));
    assert_eq!(t.devices[0].numa_affinity.as_deref(), Some("0"));
}

#[test]
fn v100_nics_named_by_device_and_pix_pairs() {
    let t =
        nvidia_smi_topo::parse(&fixture("nvidia_smi_topo", "v100-pcie-8gpu-pix-node-mlx5")).value;
    assert_eq!(t.devices[8].label, "mlx5_0");
    assert_eq!(t.devices[8].kind, TopoDeviceKind::Nic);
    // 4+4 GPUs on two switches: 6+6 PIX pairs, 16 NODE pairs.
    let pix = t
        .pcie_gpu_pairs
        .iter()
        .filter(|p| p.link == LinkKind::Pix)
        .count();
    let node = t
        .pcie_gpu_pairs
        .iter()
        .filter(|p| p.link == LinkKind::Node)
        .count();
    assert_eq!((pix, node), (12, 16));
    // No GPU NUMA ID column in this older output.
    assert_eq!(t.devices[0].gpu_numa_id, None);
}

/// Every fixture of a format parses without diagnostics, has its source, and matches its
/// snapshot.
fn snapshot_all<T: serde::Serialize>(
    format: &str,
    parse: fn(&str) -> system_profile_model::Parsed<T>,
) -> usize {
    let cases = cases(format);
    for case in &cases {
        assert!(
            data_dir(format).join(format!("{case}.source.md")).exists(),
            "{format}/{case} has no .source.md"
        );
        let parsed = parse(&fixture(format, case));
        assert!(
            parsed.diagnostics.is_empty(),
            "{format}/{case}: {:?}",
            parsed.diagnostics
        );
        insta::with_settings!({snapshot_suffix => case.clone()}, {
            insta::assert_json_snapshot!(format, parsed.value);
        });
    }
    cases.len()
}

#[test]
fn time_v_fixtures() {
    assert_eq!(
        snapshot_all("time_v", system_profile_parse::time_v::parse),
        3
    );
    let t = system_profile_parse::time_v::parse(&fixture("time_v", "python-cpu-bound")).value;
    assert_eq!((t.user_s, t.sys_s, t.wall_s), (0.51, 0.01, 0.63));
    assert_eq!(t.max_rss_bytes, 13604 * 1024);
    assert_eq!(
        (t.voluntary_ctx_switches, t.involuntary_ctx_switches),
        (2, 5)
    );
    assert_eq!(t.cpu_percent, Some(83.0));
    assert!((t.cpu_utilization.unwrap() - 0.52 / 0.63).abs() < 1e-9);
    assert_eq!(t.exit_status, Some(0));
    let t = system_profile_parse::time_v::parse(&fixture("time_v", "exit-status-3")).value;
    assert_eq!(t.exit_status, Some(3));
    let t = system_profile_parse::time_v::parse(&fixture("time_v", "killed-by-signal-9")).value;
    assert_eq!((t.exit_status, t.terminated_by_signal), (None, Some(9)));
}

#[test]
fn perf_stat_fixtures() {
    assert_eq!(
        snapshot_all("perf_stat", system_profile_parse::perf_stat::parse),
        1
    );
    let p =
        system_profile_parse::perf_stat::parse(&fixture("perf_stat", "vm-software-counters-only"))
            .value;
    assert_eq!(p.unsupported, vec!["cycles", "instructions"]);
    assert_eq!(p.ipc, None, "no IPC without hardware counters");
    let cs = p
        .counters
        .iter()
        .find(|c| c.event == "context-switches")
        .unwrap();
    assert_eq!(cs.value, Some(7.0));
    // perf's own figure: task-clock over the wall time of the run.
    assert_eq!(p.cpus_utilized, Some(0.844));
}

#[test]
fn strace_c_fixtures() {
    assert_eq!(
        snapshot_all("strace_c", system_profile_parse::strace_c::parse),
        1
    );
    let s = system_profile_parse::strace_c::parse(&fixture("strace_c", "python-startup-f")).value;
    assert_eq!((s.total_calls, s.total_errors), (1213, 135));
    assert_eq!(s.rows[0].syscall, "newfstatat");
    assert_eq!((s.rows[0].calls, s.rows[0].errors), (438, 48));
    assert_eq!(s.rows.iter().map(|r| r.calls).sum::<u64>(), s.total_calls);
    assert_eq!(s.rows.iter().map(|r| r.errors).sum::<u64>(), s.total_errors);
    let empty = system_profile_parse::strace_c::parse("");
    assert!(empty.value.rows.is_empty() && !empty.diagnostics.is_empty());
}

#[test]
fn folded_fixtures() {
    assert_eq!(
        snapshot_all("folded", system_profile_parse::folded::parse),
        3
    );
    let p =
        system_profile_parse::folded::parse(&fixture("folded", "py-spy-raw-python-hot-loop")).value;
    assert_eq!(p.total_samples, 148);
    let top = &p.by_self[0];
    assert_eq!(top.function, "hot", "{:?}", p.by_self);
    assert_eq!(top.file.as_deref(), Some("hot.py"));
    assert!(top.self_percent > 80.0, "{top:?}");
    // main and the script's <module> hold every sample of the script (the rest is start-up).
    let script_total = |f: &str| {
        p.by_total
            .iter()
            .find(|h| h.function == f && h.file.as_deref() == Some("hot.py"))
            .map(|h| h.total_samples)
    };
    assert_eq!(script_total("main"), script_total("<module>"));
    assert_eq!(script_total("main"), Some(p.by_total[0].total_samples));
}

/// The standard library's JSON encoder is charged to the benchmark's own call of it, the line
/// its source has and cProfile's callers name; pyperf's frames between the program's `main`
/// and that function do not hide it.
#[test]
fn a_library_hotspot_is_charged_to_the_line_of_the_program_that_calls_it() {
    use system_profile_model::metrics::CallVia;
    let p = system_profile_parse::folded::parse(&fixture("folded", "py-spy-raw-json-dumps")).value;
    let top = &p.call_sites[0];
    assert_eq!(
        (top.function.as_str(), top.file.as_str(), top.line, top.via),
        (
            "bench_json_dumps",
            "/tmp/jd/json_dumps.py",
            Some(22),
            CallVia::Call
        ),
        "{:?}",
        p.call_sites
    );
    assert_eq!(top.library_function, "JSONEncoder.iterencode");
    let through_line_22: f64 = p
        .call_sites
        .iter()
        .filter(|c| c.function == "bench_json_dumps" && c.line == Some(22))
        .map(|c| c.percent)
        .sum();
    // cProfile: 90.9% of the time is under `dumps`; the encoder's own samples are most of it.
    assert!(
        (80.0..=100.0).contains(&through_line_22),
        "{through_line_22}"
    );
    // pyperf is library code: none of its frames is taken for the program's.
    assert!(p
        .call_sites
        .iter()
        .all(|c| !c.file.contains("site-packages")));
}

/// `py-spy --native` on the standard library's gzip CLI: zlib's stripped static functions,
/// named by address, sum into `deflate`, the library's named frame that called them (perf,
/// by shared object: libz 96.2% of the run); and that library time is charged to the main
/// module's line that calls the compressor, gzip.py:289, not to a C source of CPython's.
#[test]
fn native_frames_sum_into_their_library_function_and_reach_the_programs_line() {
    use system_profile_model::metrics::CallVia;
    let p = system_profile_parse::folded::parse(&fixture("folded", "py-spy-raw-native-gzip")).value;
    assert!(
        p.by_self.iter().all(|f| !f.function.starts_with("0x")),
        "{:?}",
        p.by_self
    );
    let top = &p.by_self[0];
    assert_eq!(top.function, "deflate", "{:?}", p.by_self);
    assert!(top
        .file
        .as_deref()
        .is_some_and(|f| f.ends_with("libz.so.1.2.13")));
    assert!((85.0..=100.0).contains(&top.self_percent), "{top:?}");
    let site = &p.call_sites[0];
    assert_eq!(
        (
            site.function.as_str(),
            site.line,
            site.via,
            site.library_function.as_str()
        ),
        ("GzipFile.write", Some(289), CallVia::Call, "deflate"),
        "{:?}",
        p.call_sites
    );
    assert!(site.file.ends_with("/gzip.py"), "{}", site.file);
    assert!((85.0..=100.0).contains(&site.percent), "{site:?}");
    // The native code under that line, summed: perf by shared object has libz at 96.2%.
    let native = &p.native_calls[0];
    assert_eq!(
        (native.function.as_str(), native.line),
        ("GzipFile.write", Some(289))
    );
    assert!((88.0..=100.0).contains(&native.percent), "{native:?}");
    assert_eq!(native.functions[0].library, "libz.so.1.2.13");
    // A run with native frames says so; py-spy's default record of a Python loop has none.
    assert!(p.has_native_frames());
    let python_only =
        system_profile_parse::folded::parse(&fixture("folded", "py-spy-raw-python-hot-loop")).value;
    assert!(!python_only.has_native_frames());
    // No C source of the interpreter is taken for the program's code.
    assert!(
        p.call_sites.iter().all(|c| c.file.ends_with(".py")),
        "{:?}",
        p.call_sites
    );
}

#[test]
fn py_spy_dump_fixtures() {
    assert_eq!(
        snapshot_all("py_spy_dump", system_profile_parse::py_spy_dump::parse),
        1
    );
    let t =
        system_profile_parse::py_spy_dump::parse(&fixture("py_spy_dump", "sleeping-main-thread"))
            .value;
    assert_eq!(t[0].thread_name.as_deref(), Some("MainThread"));
    assert_eq!(t[0].frames[0].function, "f");
    assert!(!t[0].active);
    assert!(!system_profile_parse::py_spy_dump::parse("{")
        .diagnostics
        .is_empty());
}

#[test]
fn cprofile_json_fixtures() {
    assert_eq!(
        snapshot_all("cprofile_json", system_profile_parse::cprofile_json::parse),
        1
    );
    let c =
        system_profile_parse::cprofile_json::parse(&fixture("cprofile_json", "python-hot-loop"))
            .value;
    assert_eq!(c.by_tottime[0].function, "hot");
    assert_eq!(c.by_tottime[0].calls, 30);
    // cProfile runs the script through exec(), which holds everything.
    assert_eq!(c.by_cumtime[0].function, "<built-in method builtins.exec>");
    assert!(c.total_calls >= 60);
}

#[test]
fn sysstat_fixtures() {
    use system_profile_parse::sysstat;
    assert_eq!(snapshot_all("vmstat", sysstat::vmstat), 1);
    assert_eq!(snapshot_all("iostat", sysstat::iostat), 1);
    assert_eq!(snapshot_all("mpstat", sysstat::mpstat), 1);
    assert_eq!(snapshot_all("pidstat", sysstat::pidstat), 1);
    let v = sysstat::vmstat(&fixture("vmstat", "idle-vm-3s")).value;
    // Three rows, the first (since boot) left out.
    assert_eq!(v.series[0].samples, 2);
    assert_eq!(v.series[0].columns["cs"].mean, 79.0);
    assert_eq!(v.series[0].columns["r"].max, 1.0);
    let m = sysstat::mpstat(&fixture("mpstat", "two-cpus-json")).value;
    let entities: Vec<&str> = m.series.iter().map(|s| s.entity.as_str()).collect();
    assert_eq!(entities, ["all", "0", "1"]);
    assert_eq!(m.series[0].samples, 2);
    let io = sysstat::iostat(&fixture("iostat", "idle-vm-json")).value;
    assert_eq!(io.series[0].entity, "vda");
    assert!(io.series[0].columns.contains_key("util"));
    let p = sysstat::pidstat(&fixture("pidstat", "python-sleep-loop")).value;
    assert_eq!(p.series.len(), 1);
    assert_eq!(p.series[0].samples, 3);
    assert_eq!(p.series[0].columns["cswch/s"].max, 623.0);
    assert_eq!(p.series[0].columns["RSS"].last, 44128.0);
    for bad in ["", "{", "garbage\n"] {
        let _ = sysstat::vmstat(bad);
        let _ = sysstat::iostat(bad);
        let _ = sysstat::pidstat(bad);
    }
    assert!(!sysstat::iostat("{").diagnostics.is_empty());
}

#[test]
fn tracemalloc_json_fixtures() {
    assert_eq!(
        snapshot_all(
            "tracemalloc_json",
            system_profile_parse::tracemalloc_json::parse
        ),
        1
    );
    let m = system_profile_parse::tracemalloc_json::parse(&fixture(
        "tracemalloc_json",
        "alloc-peak-then-keep",
    ))
    .value;
    assert!(m.peak_bytes > 40_000_000);
    assert_eq!(
        (m.peak_sites_by_size[0].line, m.exit_sites_by_size[0].line),
        (4, 9)
    );
    assert!(m.exit_sites_by_count[0].count >= 10_000);
}

#[test]
fn memray_stats_fixtures() {
    assert_eq!(
        snapshot_all("memray_stats", system_profile_parse::memray_stats::parse),
        1
    );
    let m =
        system_profile_parse::memray_stats::parse(&fixture("memray_stats", "alloc-peak-then-keep"))
            .value;
    assert_eq!(m.peak_bytes, 41_712_412);
    assert_eq!(
        (m.top_by_size[0].function.as_str(), m.top_by_size[0].line),
        ("<listcomp>", Some(4))
    );
    assert_eq!(m.top_by_count[0].count, Some(40_051));
    assert_eq!(m.allocator_distribution["CALLOC"], 50_028);
    assert_eq!(m.python_allocator.as_deref(), Some("pymalloc"));
}

/// Memory live at the peak of a program that loads a 5.4 MB JSON file with the standard
/// library: the decoded objects belong to the program's `json.loads` line, by way of the
/// decoder, and the text it read to the `f.read()` line; what was freed before the peak (the
/// file object's buffer) is not there.
#[test]
fn memray_peak_fixtures() {
    fn own_code(
        text: &str,
    ) -> system_profile_model::Parsed<Vec<system_profile_model::metrics::PeakSite>> {
        system_profile_parse::memray_peak::parse(text, |f| f == "load.py")
    }
    assert_eq!(snapshot_all("memray_peak", own_code), 1);
    let sites = own_code(&fixture("memray_peak", "json-load-at-peak")).value;
    let top = &sites[0];
    assert_eq!((top.function.as_str(), top.line), ("load", Some(8)));
    assert!(
        top.via
            .as_deref()
            .is_some_and(|v| v.starts_with("raw_decode (") && v.contains("json/decoder.py:")),
        "{:?}",
        top.via
    );
    let total: u64 = sites.iter().map(|s| s.live_bytes).sum();
    // memray stats put the peak at 27.5 MiB; the sites are most of it (20 kept).
    assert!(
        top.live_bytes > 10 << 20 && total <= 28_884_000,
        "{top:?} {total}"
    );
    let read = sites
        .iter()
        .find(|s| s.line == Some(7))
        .expect("the text read");
    assert!(read.live_bytes >= 5_394_145, "{read:?}");
    // Without a notion of the program's own code, each allocation stays where it was made.
    let innermost = system_profile_parse::memray_peak::parse(
        &fixture("memray_peak", "json-load-at-peak"),
        |_| false,
    )
    .value;
    assert!(
        innermost[0].file.ends_with("json/decoder.py"),
        "{:?}",
        innermost[0]
    );
    assert!(innermost.iter().all(|s| s.via.is_none()));
}

/// A running job as this machine's one-node Slurm cluster described it.
#[test]
fn slurm_job_fixtures() {
    assert_eq!(
        snapshot_all("slurm_job", system_profile_parse::slurm::parse_job),
        1
    );
    let job = system_profile_parse::slurm::parse_job(&fixture("slurm_job", "running-two-tasks"))
        .value
        .unwrap();
    assert_eq!(
        (
            job.job_id.as_str(),
            job.name.as_deref(),
            job.user.as_deref(),
            job.state.as_str()
        ),
        ("3", Some("train-ddp"), Some("root"), "RUNNING")
    );
    assert_eq!(
        (job.node_list.as_deref(), job.num_nodes, job.num_tasks),
        (Some("vm"), Some(1), Some(2))
    );
    assert_eq!(job.work_dir.as_deref(), Some("/tmp/slurmtest"));
}

#[test]
fn dmon_fixtures_read_every_row() {
    use system_profile_parse::nvidia_smi_dmon;
    let cases = cases("nvidia_smi_dmon");
    assert_eq!(cases.len(), 3);
    for case in &cases {
        assert!(data_dir("nvidia_smi_dmon")
            .join(format!("{case}.source.md"))
            .exists());
        let p = nvidia_smi_dmon::parse(&fixture("nvidia_smi_dmon", case), 1.0);
        assert!(p.diagnostics.is_empty(), "{case}: {:?}", p.diagnostics);
        insta::with_settings!({snapshot_suffix => case.clone()}, {
            insta::assert_json_snapshot!("nvidia_smi_dmon", p.value);
        });
    }
    // 8 V100s, three rounds: the index repeating starts a new second.
    let v100 = nvidia_smi_dmon::parse(
        &fixture("nvidia_smi_dmon", "v100-pcie-8gpu-default-cols"),
        1.0,
    )
    .value;
    assert_eq!(v100.samples.len(), 24);
    assert_eq!(v100.samples[8].t_s, 1.0);
    assert_eq!(v100.samples[23].t_s, 2.0);
    let gpu2 = v100.samples.iter().find(|s| s.gpu == 2).unwrap();
    assert_eq!(
        (gpu2.power_w, gpu2.sm_clock_mhz, gpu2.mem_clock_mhz),
        (Some(35.0), Some(1230.0), Some(877.0))
    );
    assert_eq!(v100.other_columns, ["mtemp", "enc", "dec"]);
    // The H200 under gpu-burn: SM busy all the time, 628-632 W.
    let h200 = nvidia_smi_dmon::parse(&fixture("nvidia_smi_dmon", "h200-drv590-load"), 1.0).value;
    assert_eq!(h200.samples.len(), 5);
    assert!(h200
        .samples
        .iter()
        .all(|s| s.sm_util_percent == Some(100.0)));
    let watts: Vec<f64> = h200.samples.iter().filter_map(|s| s.power_w).collect();
    assert_eq!(watts, [630.0, 628.0, 629.0, 632.0, 630.0]);
}

#[test]
fn query_csv_joins_processes_to_their_gpu() {
    use system_profile_model::metrics::GpuReadings;
    use system_profile_parse::nvidia_smi_query;
    for gpu in ["h100", "h200"] {
        let mut r = GpuReadings::default();
        let d = nvidia_smi_query::add(
            &mut r,
            &fixture(
                "nvidia_smi_query",
                &format!("{gpu}-drv590-load-query-gpu-allfields"),
            ),
        );
        assert!(d.is_empty(), "{gpu}: {d:?}");
        let d = nvidia_smi_query::add(
            &mut r,
            &fixture(
                "nvidia_smi_query",
                &format!("{gpu}-drv590-load-query-compute-apps"),
            ),
        );
        assert!(d.is_empty(), "{gpu}: {d:?}");
        assert_eq!(r.samples.len(), 1);
        assert_eq!(r.processes.len(), 3);
        assert!(r.processes.iter().all(|p| p.gpu == Some(0)), "{gpu}");
        insta::with_settings!({snapshot_suffix => gpu}, {
            insta::assert_json_snapshot!("nvidia_smi_query", r);
        });
    }
    let mut r = GpuReadings::default();
    nvidia_smi_query::add(
        &mut r,
        &fixture("nvidia_smi_query", "h200-drv590-load-query-gpu-allfields"),
    );
    nvidia_smi_query::add(
        &mut r,
        &fixture("nvidia_smi_query", "h200-drv590-load-query-compute-apps"),
    );
    let s = &r.samples[0];
    const MIB: u64 = 1024 * 1024;
    assert_eq!(s.sm_util_percent, Some(100.0));
    assert_eq!(s.mem_used_bytes, Some(32362 * MIB));
    assert_eq!(r.devices[0].mem_total_bytes, Some(143771 * MIB));
    assert_eq!(
        (s.power_w, s.sm_clock_mhz, s.mem_clock_mhz, s.temperature_c),
        (Some(627.4), Some(1980.0), Some(3201.0), Some(52.0))
    );
    // The processes hold all but 20 MiB of what the GPU says is used (the driver's own).
    let held: u64 = r.processes.iter().filter_map(|p| p.used_memory_bytes).sum();
    assert_eq!(s.mem_used_bytes.unwrap() - held, 20 * MIB);
    let burn = r
        .processes
        .iter()
        .find(|p| p.name.as_deref() == Some("./gpu_burn"))
        .unwrap();
    assert_eq!(
        (burn.pid, burn.used_memory_bytes),
        (10309, Some(28234 * MIB))
    );
}

/// The expected numbers come from an independent count over the same files with regular
/// expressions: `python3 crates/parse/tests/tools/nccl_count.py crates/parse/tests/data/nccl_debug/*.txt`.
#[test]
fn nccl_logs_give_communicators_transports_and_collectives() {
    use system_profile_parse::nccl_debug;
    let cases = cases("nccl_debug");
    assert_eq!(cases.len(), 4);
    for case in &cases {
        assert!(data_dir("nccl_debug")
            .join(format!("{case}.source.md"))
            .exists());
        let p = nccl_debug::parse(&fixture("nccl_debug", case));
        assert!(p.diagnostics.is_empty(), "{case}: {:?}", p.diagnostics);
        insta::with_settings!({snapshot_suffix => case.clone()}, {
            insta::assert_json_snapshot!("nccl_debug", p.value);
        });
    }
    // nccl-tests all_reduce_perf, 2 A100 PCIe in one process, COLL logged: 990 AllReduce
    // calls of float32 (count x 4 bytes: 1 545 433 251 840 bytes in all), 8 MiB to 8 GiB.
    let a100 = nccl_debug::parse(&fixture(
        "nccl_debug",
        "a100-pcie-2gpu-nccltests-coll-subsys",
    ))
    .value;
    assert_eq!(a100.version.as_deref(), Some("2.27.7+cuda13.0"));
    assert_eq!(a100.communicators.len(), 1);
    assert_eq!(a100.communicators[0].ranks.len(), 2);
    let t = &a100.transports[0];
    assert_eq!(
        (
            t.transport.as_str(),
            t.kind.as_str(),
            t.connections,
            t.pairs
        ),
        ("P2P/direct pointer/read", "P2P", 48, 2)
    );
    let c = &a100.collectives[0];
    assert_eq!(
        (c.op.as_str(), c.datatype.as_str(), c.calls),
        ("AllReduce", "float32", 990)
    );
    assert_eq!(c.total_bytes, 1_545_433_251_840);
    assert_eq!(c.sizes.first().map(|s| s.bytes), Some(8 << 20));
    assert_eq!(c.sizes.last().map(|s| s.bytes), Some(8 << 30));
    assert!(a100.algorithm_choices.iter().any(|a| a.op == "AllReduce"
        && a.bytes == 8_388_608
        && a.algorithm == "RING"
        && a.protocol == "SIMPLE"));
    // Four L40S nodes over EFA: every pair through the network, 24 connections, 6 pairs.
    let efa = nccl_debug::parse(&fixture("nccl_debug", "aws-g6e-l40s-4node-libfabric-efa")).value;
    assert_eq!(efa.networks, ["Libfabric"]);
    assert_eq!(
        (
            efa.transports[0].kind.as_str(),
            efa.transports[0].connections,
            efa.transports[0].pairs
        ),
        ("NET", 24, 6)
    );
    assert!(
        efa.communicators.iter().all(|c| c.nnodes == Some(4)),
        "{:?}",
        efa.communicators
    );
    // p4d with the OFI plugin failing: NCCL falls back to sockets and says why.
    let fallback = nccl_debug::parse(&fixture(
        "nccl_debug",
        "aws-p4d-a100-4rank-ofi-fail-socket-fallback",
    ))
    .value;
    assert_eq!(fallback.networks, ["Socket"]);
    assert!(
        fallback
            .warnings
            .iter()
            .any(|w| w.contains("aws-ofi-nccl initialization failed")),
        "{:?}",
        fallback.warnings
    );
    let p2p = nccl_debug::parse(&fixture("nccl_debug", "aws-p4d-a100-4rank-p2p-cumem")).value;
    assert_eq!(
        (
            p2p.transports[0].transport.as_str(),
            p2p.transports[0].connections,
            p2p.transports[0].pairs
        ),
        ("P2P/CUMEM/read", 192, 4)
    );
    assert_eq!(p2p.communicators.len(), 2);
    assert!(p2p
        .communicators
        .iter()
        .all(|c| c.ranks.len() == 4 && c.nranks == 4));
}

#[test]
fn nsys_stats_reports_of_three_nsys_versions() {
    use system_profile_parse::nsys_stats;
    let cases = cases("nsys_stats");
    assert_eq!(cases.len(), 3);
    for case in &cases {
        assert!(data_dir("nsys_stats")
            .join(format!("{case}.source.md"))
            .exists());
        let p = nsys_stats::parse(&fixture("nsys_stats", case));
        assert!(p.diagnostics.is_empty(), "{case}: {:?}", p.diagnostics);
        insta::with_settings!({snapshot_suffix => case.clone()}, {
            insta::assert_json_snapshot!("nsys_stats", p.value);
        });
    }
    // Kernel rows and their summed Total Time (ns), counted separately with awk-like splitting.
    for (case, rows, total_ns) in [
        (
            "pytorch-lm-2.7B-nsys2024.6-processing-format",
            23,
            3_389_068_613.0,
        ),
        (
            "cuvs-cagra-search-8reports-thousands-sep",
            22,
            10_278_282_158.0,
        ),
        (
            "cutlass-gemm-profile-stats-true-with-progress",
            1,
            5_954_009.0,
        ),
    ] {
        let s = nsys_stats::parse(&fixture("nsys_stats", case)).value;
        assert_eq!(s.kernels.len(), rows, "{case}");
        let total: f64 = s.kernels.iter().map(|k| k.total_us).sum();
        assert!((total * 1000.0 - total_ns).abs() < 1.0, "{case}: {total}");
        assert!(s.reports.contains(&"cuda_gpu_kern_sum".to_string()));
    }
    let lm = nsys_stats::parse(&fixture(
        "nsys_stats",
        "pytorch-lm-2.7B-nsys2024.6-processing-format",
    ))
    .value;
    let launch = lm
        .cuda_api
        .iter()
        .find(|c| c.name == "cudaLaunchKernel")
        .unwrap();
    assert_eq!((launch.calls, launch.total_us), (7328, 2_361_231.070));
    assert_eq!(lm.launches.launches, 7328);
    let htod = lm.copies.iter().find(|c| c.direction == "HtoD").unwrap();
    assert_eq!((htod.count, htod.total_us), (294, 4_460_346.194));
    assert!(
        lm.skipped.iter().any(|s| s.contains("NVTX")),
        "{:?}",
        lm.skipped
    );
    // Thousands separators, NVTX ranges with a style column, OS runtime calls.
    let cuvs = nsys_stats::parse(&fixture(
        "nsys_stats",
        "cuvs-cagra-search-8reports-thousands-sep",
    ))
    .value;
    assert_eq!(cuvs.nvtx.len(), 2);
    assert_eq!(cuvs.nvtx[0].name, "CCCL:cub::DeviceRadixSort");
    assert_eq!(
        (cuvs.nvtx[0].instances, cuvs.nvtx[0].style.as_deref()),
        (5862, Some("PushPop"))
    );
    assert_eq!(cuvs.os_runtime.len(), 31);
    assert_eq!(cuvs.os_runtime[0].name, "pthread_cond_wait");
    assert_eq!(cuvs.os_runtime[0].total_us, 124_349_071.840);
}

#[test]
fn memory_profile_of_a_function_that_holds_64_mib() {
    use system_profile_parse::memory_profile;
    let p = memory_profile::parse(&fixture("memory_profile", "grow-64mib"));
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    let m = &p.value;
    assert_eq!(
        (m.function.as_str(), m.top_increment_line),
        ("grow", Some(5))
    );
    assert_eq!(m.lines.len(), 6);
    assert!((m.lines[2].increment_mib.unwrap() - 64.0).abs() < 0.1);
    assert!((m.peak_mib.unwrap() - 86.4140625).abs() < 1e-9);
    insta::assert_json_snapshot!("memory_profile", p.value);
    assert!(!memory_profile::parse("{").diagnostics.is_empty());
}

#[test]
fn nvlink_status_counters_and_capabilities() {
    use system_profile_parse::nvidia_smi_nvlink;
    let cases = cases("nvidia_smi_nvlink");
    assert_eq!(cases.len(), 8);
    for case in &cases {
        assert!(data_dir("nvidia_smi_nvlink")
            .join(format!("{case}.source.md"))
            .exists());
        let p = nvidia_smi_nvlink::parse(&fixture("nvidia_smi_nvlink", case));
        assert!(p.diagnostics.is_empty(), "{case}: {:?}", p.diagnostics);
        insta::with_settings!({snapshot_suffix => case.clone()}, {
            insta::assert_json_snapshot!("nvidia_smi_nvlink", p.value);
        });
    }
    let parse = |c: &str| nvidia_smi_nvlink::parse(&fixture("nvidia_smi_nvlink", c)).value;
    // An H100 SXM: 18 links of 26.562 GB/s each way, 478 GB/s in all (counted with grep).
    let h100 = parse("h100-status-i0");
    assert_eq!(
        (h100.gpus[0].active_links, h100.gpus[0].links.len()),
        (18, 18)
    );
    assert!((h100.gpus[0].total_speed_gbps.unwrap() - 18.0 * 26.562).abs() < 1e-9);
    // Tabs (driver 590's raw output) read the same as spaces.
    assert_eq!(
        parse("h100-drv590-nvlink-s-raw-tabs").gpus[0].links,
        h100.gpus[0].links
    );
    // A100: 12 links of 25 GB/s on GPU 0; the paste stops after GPU 1's second link.
    let a100 = parse("a100-sxm4-40gb-nvlink-s-partial");
    assert_eq!(
        (
            a100.gpus.len(),
            a100.gpus[0].links.len(),
            a100.gpus[1].links.len()
        ),
        (2, 12, 2)
    );
    // H800 counters: 8 links with data TX and RX in KiB; busy far above idle.
    let busy = parse("h800-gpu0-gt-d-during-training");
    let idle = parse("h800-gpu0-gt-d-idle");
    assert_eq!(busy.gpus[0].links.len(), 8);
    assert_eq!(busy.gpus[0].links[0].data_tx_kib, Some(1_390_774_681));
    assert!(busy.gpus[0]
        .links
        .iter()
        .zip(&idle.gpus[0].links)
        .all(|(b, i)| b.data_tx_kib > i.data_tx_kib));
    let caps = parse("h100-capabilities-i0");
    assert_eq!(caps.gpus[0].links.len(), 18);
    assert_eq!(
        caps.gpus[0].links[0].capabilities.get("P2P is supported"),
        Some(&true)
    );
    assert!(!nvidia_smi_nvlink::parse("hello").diagnostics.is_empty());
}

#[test]
fn nccl_tests_tables_old_and_new() {
    use system_profile_parse::nccl_tests;
    let cases = cases("nccl_tests");
    assert_eq!(cases.len(), 2);
    for case in &cases {
        assert!(data_dir("nccl_tests")
            .join(format!("{case}.source.md"))
            .exists());
        let p = nccl_tests::parse(&fixture("nccl_tests", case));
        assert!(p.diagnostics.is_empty(), "{case}: {:?}", p.diagnostics);
        insta::with_settings!({snapshot_suffix => case.clone()}, {
            insta::assert_json_snapshot!("nccl_tests", p.value);
        });
    }
    // 16 H100 ranks over two nodes, 8 B to 8 GiB: 31 sizes, 338.82 GB/s bus bandwidth at 8 GiB.
    let h100 = nccl_tests::parse(&fixture(
        "nccl_tests",
        "h100-2node-16rank-all_reduce_perf-8B-8G",
    ))
    .value;
    assert_eq!((h100.ranks, h100.rows.len()), (16, 31));
    assert_eq!(h100.gpu.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(
        (h100.peak_busbw_gbps, h100.peak_busbw_size_bytes),
        (Some(338.82), Some(8_589_934_592))
    );
    assert_eq!(h100.avg_busbw_gbps, Some(70.742));
    assert!(h100.out_of_bounds_ok);
    let v100 = nccl_tests::parse(&fixture(
        "nccl_tests",
        "v100-sxm2-8gpu-all_reduce_perf-g8-old-format",
    ))
    .value;
    assert_eq!(v100.ranks, 8);
    assert_eq!(v100.avg_busbw_gbps, Some(25.9598));
    assert_eq!(
        (
            v100.rows[0].size_bytes,
            v100.rows[0].out_of_place_wrong.as_str()
        ),
        (8, "1e-07")
    );
}

#[test]
fn instrument_log_of_real_helper_runs() {
    use system_profile_parse::instrument_log;
    let mut text = fixture("instrument_log", "cpu-gloo-torch");
    // A crash mid-write leaves at most a torn last line: said, not fatal.
    text.push_str("{\"kind\":\"timing\",\"t\":1");
    let parsed = instrument_log::parse(&text);
    let last = text.lines().count();
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
    assert_eq!(parsed.diagnostics[0].line, Some(last));
    let s = parsed.value;
    // Two ranks and their launcher, tensors.py twice (itself and through the runner), busy.py.
    assert_eq!(s.processes, 5);
    let work = s.sites.iter().find(|x| x.site == "work").unwrap();
    assert_eq!((work.calls, work.timed), (40, 10));
    // busy.py asks for 2..5 ms per call.
    assert!(
        work.wall_s_p50.unwrap() >= 0.002 && work.wall_s_p95.unwrap() < 0.02,
        "{work:?}"
    );
    let est = work.wall_s_total_est.unwrap();
    assert!((est - work.wall_s_mean.unwrap() * 40.0).abs() < 1e-12);
    let sync = s.sites.iter().find(|x| x.site == "sync").unwrap();
    assert_eq!(sync.calls, 8, "4 calls on each of 2 ranks");
    let ops: Vec<(&str, u64, u64, u32)> = s
        .collectives
        .iter()
        .map(|c| (c.op.as_str(), c.count, c.bytes_p50, c.world_size))
        .collect();
    assert_eq!(
        ops,
        [
            ("all_reduce", 8, 1 << 20, 2),
            ("all_gather", 8, 2 << 20, 2),
            ("broadcast", 8, 1 << 20, 2),
            ("barrier", 8, 0, 2)
        ]
    );
    let ar = &s.collectives[0];
    assert_eq!(ar.backend, "gloo");
    assert!(ar.latency_s_p50 > 0.0 && ar.latency_s_p95 >= ar.latency_s_p50);
    // all_reduce's bus bandwidth equals its algorithm bandwidth at world size 2.
    assert!((ar.busbw_gbps_p50 - ar.algbw_gbps_p50).abs() < 1e-12);
    assert!(
        s.transfers.is_empty(),
        "no device crossed on a CPU-only machine"
    );
    let dup = s.duplicates.as_ref().unwrap();
    assert_eq!(dup.bytes_duplicated, 4 << 20);
    assert!(s.memory.as_ref().unwrap().rss_bytes_max > 50 << 20);
    assert!(
        s.notes.iter().any(|n| n.contains("CUDA is not available")),
        "{:?}",
        s.notes
    );
}

#[test]
fn pyinstrument_and_scalene_on_richards_agree_with_the_truth_set() {
    // The truth corpus (tests/truth/scenarios/richards): a flat profile led by `schedule`,
    // `Task.runTask` and `TaskState.isTaskHoldingOrWaiting`.
    let truth = ["schedule", "runTask", "isTaskHoldingOrWaiting"];
    let named = |f: &str| {
        truth
            .iter()
            .any(|t| f == *t || f.ends_with(&format!(".{t}")))
    };
    let p = system_profile_parse::pyinstrument_session::parse(&fixture(
        "pyinstrument_session",
        "richards",
    ));
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    let top = &p.value.by_self[0];
    assert!(named(&top.function), "{top:?}");
    assert!(top.file.as_deref().unwrap().ends_with("richards.py"));
    assert!(p.value.by_total.iter().all(|f| !f
        .file
        .as_deref()
        .unwrap_or("")
        .contains("pyinstrument")));
    insta::assert_json_snapshot!("pyinstrument_richards_top", &p.value.by_self[..8]);

    let s = system_profile_parse::scalene_json::parse(&fixture("scalene_json", "richards-memory"));
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    assert!(s.value.memory_profiled);
    let stacks = system_profile_parse::scalene_json::stacks(&s.value);
    assert!(
        named(&stacks.by_self[0].function),
        "{:?}",
        stacks.by_self[0]
    );
    insta::assert_json_snapshot!("scalene_richards_functions", &s.value.functions[..5]);
}
