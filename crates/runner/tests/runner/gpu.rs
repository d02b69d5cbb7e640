use super::*;
use std::time::{Duration, Instant};
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::RunStatus;
use system_profile_runner::{execute, RunErrorKind};

/// On a machine with a GPU the NVML sampler reads every GPU over the window and `measure` adds
/// the GPU series; without one both say why, and `measure` still measures the CPU side.
#[tokio::test]
async fn nvml_sampler_reads_the_gpus_or_says_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let mut machine = input(Method::NvmlSampler, RunTarget::System { system: true });
    machine.duration_s = Some(1.0);
    let sampled = execute(&machine, &place(&dir.path().join("nvml"))).await;
    let mut measure = input(Method::Measure, command(&["sleep", "0.3"]));
    measure.options.gpu = Some(true);
    let measured = execute(&measure, &place(&dir.path().join("measure")))
        .await
        .unwrap();
    assert_eq!(measured.status, RunStatus::Completed);
    assert!(measured.metrics.procfs.is_some());
    match system_profile_sample::nvml::nvml() {
        Ok(nvml) => {
            let count = nvml.device_count().unwrap();
            let e = sampled.unwrap();
            let gpu = e.metrics.gpu.as_ref().unwrap();
            assert_eq!(gpu.source, "nvml");
            assert_eq!(gpu.devices.len() as u32, count);
            // 10 Hz for a second: about ten ticks per GPU.
            assert!(gpu.samples >= 5 * u64::from(count), "{gpu:?}");
            for d in &gpu.devices {
                let mem = d.series["mem_used_bytes"];
                assert!(mem.max <= d.mem_total_bytes.unwrap() as f64, "{d:?}");
                assert!(d.series["sm_util_percent"].max <= 100.0);
            }
            let lines = std::fs::read_to_string(dir.path().join("nvml/nvml.jsonl")).unwrap();
            assert_eq!(lines.lines().count() as u64, gpu.samples);
            assert!(measured.metrics.gpu.is_some(), "{measured:?}");
        }
        Err(reason) => {
            let err = sampled.unwrap_err();
            assert_eq!(err.kind(), RunErrorKind::ToolUnavailable);
            assert!(
                err.to_string().contains("NVML could not be loaded"),
                "{err}"
            );
            assert!(reason.contains("--gpus all"));
            assert!(measured.metrics.gpu.is_none());
            assert!(
                measured
                    .warnings
                    .iter()
                    .any(|w| w.starts_with("no GPU series in this run: NVML could not be loaded")),
                "{:?}",
                measured.warnings
            );
        }
    }
}

/// A stand-in `nvidia-smi` that prints what a real one printed on an H200 under load
/// (tests/data of the parse crate) and records its arguments; `dmon -c` ends by itself, the
/// query loop runs until stopped, like the real ones.
fn fake_nvidia_smi(dir: &Path) -> String {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../parse/tests/data");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {argv}\ncase \"$1\" in\n  dmon) cat {data}/nvidia_smi_dmon/h200-drv590-load.txt\n        case \"$*\" in *-c*) exit 0;; esac;;\n  topo) cat {data}/nvidia_smi_topo/aws-g6e-4gpu-pcie-node.txt; exit 0;;\n  nvlink) case \"$2\" in\n      -s) cat {data}/nvidia_smi_nvlink/h100-status-i0.txt;;\n      *) if [ -f {seen} ]; then cat {data}/nvidia_smi_nvlink/h800-gpu0-gt-d-during-training.txt; else touch {seen}; cat {data}/nvidia_smi_nvlink/h800-gpu0-gt-d-idle.txt; fi;;\n    esac\n    exit 0;;\n  *) cat {data}/nvidia_smi_query/h200-drv590-load-query-gpu-allfields.txt;;\nesac\nexec sleep 30\n",
        argv = dir.join("argv.txt").display(),
        seen = dir.join("counters-read-once").display(),
    );
    let path = bin.join("nvidia-smi");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

#[tokio::test]
async fn nvidia_smi_dmon_and_query_beside_the_machine_and_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_nvidia_smi(dir.path());
    let mut dmon = input(Method::NvidiaSmiDmon, RunTarget::System { system: true });
    dmon.duration_s = Some(2.0);
    dmon.env.insert("PATH".into(), path.clone());
    let e = execute(&dmon, &place(&dir.path().join("dmon")))
        .await
        .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let g = e.metrics.gpu.as_ref().unwrap();
    assert_eq!(g.source, "nvidia-smi dmon");
    assert_eq!(g.samples, 5);
    let d = &g.devices[0];
    assert_eq!(d.series["sm_util_percent"].p50, 100.0);
    assert!((d.series["power_w"].mean - 629.8).abs() < 1e-9, "{d:?}");
    assert_eq!(d.series["power_w"].max, 632.0);
    let argv = std::fs::read_to_string(dir.path().join("argv.txt")).unwrap();
    assert_eq!(argv.lines().next(), Some("dmon -s pucmt -d 1 -o T -c 2"));

    // The query beside a command: it runs as long as the command does, then is stopped.
    let mut query = input(Method::NvidiaSmiQuery, command(&["sleep", "0.5"]));
    query.env.insert("PATH".into(), path);
    let started = Instant::now();
    let e = execute(&query, &place(&dir.path().join("query")))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the query loop was stopped"
    );
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    let g = e.metrics.gpu.as_ref().unwrap();
    assert_eq!(g.source, "nvidia-smi query");
    let d = &g.devices[0];
    assert_eq!(d.name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(
        d.series["mem_used_bytes"].max,
        (32362u64 * 1024 * 1024) as f64
    );
    let argv = std::fs::read_to_string(dir.path().join("argv.txt")).unwrap();
    assert!(
        argv.lines()
            .nth(1)
            .unwrap()
            .starts_with("--query-gpu=timestamp,index,"),
        "{argv}"
    );
    let kinds: Vec<ArtifactKind> = e.artifacts.iter().map(|a| a.kind).collect();
    assert!(
        kinds.contains(&ArtifactKind::NvidiaSmiQueryCsv),
        "{kinds:?}"
    );
    // No nvidia-smi at all: an error that says so.
    let mut none = input(Method::NvidiaSmiDmon, RunTarget::System { system: true });
    none.env.insert("PATH".into(), "/nonexistent".into());
    let err = execute(&none, &place(&dir.path().join("none")))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), RunErrorKind::ToolUnavailable, "{err}");
}

/// NCCL cannot run here (no GPU), so the program stands in for a job's ranks: two processes
/// that each write, where NCCL_DEBUG_FILE says, half of the lines NCCL wrote on a real
/// 4-GPU p4d (parse's tests/data). What is checked is the plumbing: the variables set, one
/// file per process found and parsed together, and a program without NCCL said to be one.
#[tokio::test]
async fn nccl_debug_sets_the_variables_and_reads_every_process_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../parse/tests/data/nccl_debug/aws-p4d-a100-4rank-p2p-cumem.txt"
    );
    let program = format!(
        r#"import os, socket
assert os.environ["NCCL_DEBUG"] == "INFO", os.environ.get("NCCL_DEBUG")
assert "COLL" in os.environ["NCCL_DEBUG_SUBSYS"]
lines = open({log:?}).read().splitlines(True)
half = 1 if os.fork() == 0 else 0
path = os.environ["NCCL_DEBUG_FILE"].replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
open(path, "w").writelines(lines[half::2])
if half == 0:
    os.wait()
"#
    );
    let py = python();
    let e = execute(
        &input(Method::NcclDebug, command(&[&py, "-c", &program])),
        &place(&dir.path().join("two")),
    )
    .await
    .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert_eq!(
        e.artifacts
            .iter()
            .filter(|a| a.kind == ArtifactKind::NcclLog)
            .count(),
        2
    );
    let n = e.metrics.nccl.as_ref().unwrap();
    // Split between two files, the lines still add up to the whole log's numbers.
    assert_eq!(n.transports[0].transport, "P2P/CUMEM/read");
    assert_eq!(n.transports[0].connections, 192);
    assert_eq!(n.communicators.len(), 2);
    assert!(n.communicators.iter().all(|c| c.ranks.len() == 4));
    assert!(
        e.metrics.nccl_tests.is_none(),
        "no nccl-tests table was printed"
    );

    // An nccl-tests program: its table, as a real all_reduce_perf printed it, is read too.
    let table = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../parse/tests/data/nccl_tests/h100-2node-16rank-all_reduce_perf-8B-8G.txt"
    );
    let e = execute(
        &input(Method::NcclDebug, command(&["cat", table])),
        &place(&dir.path().join("table")),
    )
    .await
    .unwrap();
    let t = e.metrics.nccl_tests.as_ref().expect("the nccl-tests table");
    assert_eq!(
        (t.ranks, t.rows.len(), t.peak_busbw_gbps),
        (16, 31, Some(338.82))
    );

    let e = execute(
        &input(
            Method::NcclDebug,
            command(&[&py, "-c", "print('no collectives here')"]),
        ),
        &place(&dir.path().join("none")),
    )
    .await
    .unwrap();
    assert!(
        e.warnings
            .iter()
            .any(|w| w.starts_with("NCCL said nothing")),
        "{:?}",
        e.warnings
    );
}

/// nsys cannot run here (no GPU driver), so a stand-in `nsys` writes an empty report, runs
/// the command, and for `stats` prints what a real nsys 2024.6 printed for a PyTorch model
/// (parse's tests/data): the plumbing, report file and parsed tables are what is checked.
#[tokio::test]
async fn nsys_profiles_the_command_then_reads_its_stats() {
    let dir = tempfile::tempdir().unwrap();
    let stats = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../parse/tests/data/nsys_stats/pytorch-lm-2.7B-nsys2024.6-processing-format.txt"
    );
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {argv}\nif [ \"$1\" = profile ]; then\n  touch \"$7.nsys-rep\"\n  shift 7\n  exec \"$@\"\nfi\ncat {stats}\n",
        argv = dir.path().join("argv.txt").display()
    );
    let path = bin.join("nsys");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut run = input(
        Method::Nsys,
        command(&["sh", "-c", "echo ran > marker.txt"]),
    );
    run.env.insert(
        "PATH".into(),
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    let e = execute(&run, &place(&dir.path().join("nsys")))
        .await
        .unwrap();
    assert_eq!(e.status, RunStatus::Completed, "{e:?}");
    assert!(
        dir.path().join("nsys/marker.txt").exists(),
        "the command ran in its cwd"
    );
    let argv = std::fs::read_to_string(dir.path().join("argv.txt")).unwrap();
    let mut lines = argv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("profile --trace cuda,nvtx,osrt --force-overwrite true -o "));
    assert!(lines
        .next()
        .unwrap()
        .starts_with("stats --report cuda_gpu_kern_sum,"));
    let n = e.metrics.nsys.as_ref().unwrap();
    assert_eq!(n.kernels.len(), 23);
    assert_eq!(n.launches.launches, 7328);
    let kinds: Vec<ArtifactKind> = e.artifacts.iter().map(|a| a.kind).collect();
    assert!(
        kinds.contains(&ArtifactKind::NsysRep) && kinds.contains(&ArtifactKind::NsysStats),
        "{kinds:?}"
    );
}

/// Topology and NVLink through the same stand-in nvidia-smi: a 4-GPU PCIe node's matrix (every
/// pair over PCIe, flagged) and an H100's 18 links, with counters read at both ends of the
/// window (an H800's idle and busy counters: the difference is what the links carried).
#[tokio::test]
async fn topology_and_nvlink_status_read_the_interconnect() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_nvidia_smi(dir.path());
    let mut topo = input(Method::NvidiaSmiTopo, RunTarget::System { system: true });
    topo.env.insert("PATH".into(), path.clone());
    let e = execute(&topo, &place(&dir.path().join("topo")))
        .await
        .unwrap();
    let t = e.metrics.topology.as_ref().unwrap();
    assert_eq!(t.nvlink_gpu_pairs, 0);
    assert_eq!(t.pcie_gpu_pairs.len(), 6, "4 GPUs, 6 pairs, all over PCIe");
    assert!(
        e.warnings.iter().any(|w| w.contains("6 GPU pair(s)")),
        "{:?}",
        e.warnings
    );

    let mut nv = input(Method::NvlinkStatus, RunTarget::System { system: true });
    nv.duration_s = Some(0.2);
    nv.env.insert("PATH".into(), path);
    let e = execute(&nv, &place(&dir.path().join("nvlink")))
        .await
        .unwrap();
    let g = &e.metrics.nvlink.as_ref().unwrap().gpus[0];
    assert_eq!(g.active_links, 18);
    // Link 0 carried 1,390,774,681 - 5,863,784 KiB of data out over the window.
    assert_eq!(g.links[0].data_tx_kib, Some(1_390_774_681 - 5_863_784));
    assert_eq!(
        g.links[17].data_tx_kib, None,
        "the H800 fixture has 8 links"
    );
}
