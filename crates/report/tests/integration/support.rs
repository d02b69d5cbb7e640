//! Sessions under a scratch root: the captured ones (`tests/data/sessions/<name>/`) with
//! `@ROOT@` put back, and GPU sessions made of the parsers' outputs on real GPU tools' files.

use std::path::{Path, PathBuf};
use system_profile_model::report::{Lang, Report, SummarizeInput, SummarizeOutput};
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::{
    Artifact, Method, RunList, RunMetrics, RunRecord, RunStatus, RunTarget,
};
use system_profile_model::trace::{TraceFile, TraceReport};
use system_profile_report::ReportConfig;

pub fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

/// A fixture of the parse crate (real tool outputs, each with its `.source.md`).
pub fn parse_fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../parse/tests/data")
        .join(rel)
}

pub struct Root {
    pub dir: tempfile::TempDir,
}

impl Root {
    pub fn new() -> Root {
        Root {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn config(&self, current: &str) -> ReportConfig {
        ReportConfig {
            root: self.path().to_path_buf(),
            current_session: current.into(),
        }
    }

    /// Put a captured session under this root; returns its name.
    pub fn install(&self, name: &str) -> String {
        let src = data(&format!("sessions/{name}"));
        let session = std::fs::read_to_string(src.join("SESSION"))
            .unwrap()
            .trim()
            .to_string();
        let root = self.path().to_string_lossy().into_owned();
        let out = self.path().join("profile_output");
        copy_tree(&src, &out.join(&session), &root, &|rel| {
            !matches!(rel, "SESSION" | "instrument.jsonl" | "ledger.json")
                && !rel.starts_with("files")
        });
        if src.join("instrument.jsonl").exists() {
            let log = out.join("instrument/measure.jsonl");
            std::fs::create_dir_all(log.parent().unwrap()).unwrap();
            let mut text = std::fs::read_to_string(log.as_path()).unwrap_or_default();
            text.push_str(
                &std::fs::read_to_string(src.join("instrument.jsonl"))
                    .unwrap()
                    .replace("@ROOT@", &root),
            );
            std::fs::write(&log, text).unwrap();
        }
        if src.join("ledger.json").exists() {
            // The helper the first change created is the instrument crate's own, written as it
            // would write it today; its recorded hash follows it, so a helper changed since the
            // capture does not show as "edited by someone else".
            let helper_source = system_profile_instrument::HELPER_SOURCE;
            let mut ledger: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(src.join("ledger.json"))
                    .unwrap()
                    .replace("@ROOT@", &root),
            )
            .unwrap();
            for change in ledger["changes"].as_array_mut().unwrap() {
                if change["role"] == "helper" {
                    change["sha256_after"] =
                        system_profile_instrument::ledger::sha256_hex(helper_source.as_bytes())
                            .into();
                }
            }
            std::fs::write(
                out.join("ledger.json"),
                serde_json::to_string_pretty(&ledger).unwrap(),
            )
            .unwrap();
            // The files as the changes left them, byte for byte (Part B checks their hashes).
            copy_raw(&src.join("files"), self.path());
            let helper = out.join("instrument/_sp_profile.py");
            std::fs::create_dir_all(helper.parent().unwrap()).unwrap();
            std::fs::write(&helper, helper_source).unwrap();
        }
        // The programs as they stood in the scratch root (the report reads their lines to
        // tell a blocked frame from a working one), where a change did not leave its own.
        for e in std::fs::read_dir(data("programs")).unwrap().flatten() {
            let to = self.path().join(e.file_name());
            if !to.exists() {
                std::fs::copy(e.path(), to).unwrap();
            }
        }
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        std::fs::create_dir_all(self.path().join("examples")).unwrap();
        for name in ["cpu_hotspot.py", "memory_hog.py"] {
            let to = self.path().join("examples").join(name);
            if !to.exists() {
                std::fs::copy(examples.join(name), to).unwrap();
            }
        }
        session
    }

    pub fn summarize(&self, session: &str, lang: Lang) -> SummarizeOutput {
        system_profile_report::summarize(
            &self.config(session),
            &SummarizeInput {
                lang,
                ..SummarizeInput::default()
            },
        )
        .unwrap_or_else(|e| panic!("summarize {session}: {e}"))
    }

    pub fn report(&self, session: &str) -> Report {
        self.summarize(session, Lang::En).report
    }
}

fn copy_tree(src: &Path, dst: &Path, root: &str, keep: &dyn Fn(&str) -> bool) {
    for entry in walk(src) {
        let rel = entry
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if !keep(&rel) {
            continue;
        }
        let to = dst.join(&rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let text = std::fs::read_to_string(&entry).unwrap();
        std::fs::write(to, text.replace("@ROOT@", root)).unwrap();
    }
}

fn copy_raw(src: &Path, dst: &Path) {
    for entry in walk(src) {
        let to = dst.join(entry.strip_prefix(src).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, to).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

pub fn record(
    run_id: &str,
    profiler: Method,
    metrics: RunMetrics,
    artifacts: Vec<Artifact>,
) -> RunRecord {
    RunRecord {
        run_id: run_id.into(),
        session: String::new(),
        profiler,
        observers: Vec::new(),
        label: None,
        status: RunStatus::Completed,
        target: RunTarget::Command {
            command: vec!["python".into(), "train.py".into()],
            shell: false,
        },
        argv: Vec::new(),
        cwd: "/".into(),
        env: Default::default(),
        started_at_unix_s: 1_700_000_000.0,
        ended_at_unix_s: Some(1_700_000_060.0),
        wall_s: None,
        exit_code: Some(0),
        signal: None,
        dir: String::new(),
        artifacts,
        metrics,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        warnings: Vec::new(),
        error: None,
        not_started: None,
        error_kind: None,
        instead_of: None,
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn trace(rel: &str) -> system_profile_model::metrics::TraceAnalysis {
    let file = std::fs::File::open(parse_fixture(rel)).unwrap();
    system_profile_parse::kineto::analyze_reader(flate2::read::GzDecoder::new(file)).value
}

/// Which NCCL log a GPU session carries.
#[derive(Clone, Copy)]
pub enum Nccl {
    /// nccl-tests on two A100 PCIe GPUs with the COLL subsystem: P2P between the GPUs.
    A100Pcie,
    /// DeepSpeed on a p4d whose OFI plugin failed: NCCL fell back to sockets.
    SocketFallback,
}

/// A GPU session made of the parsers' outputs on real files: nvidia-smi dmon under load on an
/// H200, the topology of an 8-GPU NVLink (NV18) H100 machine, an NCCL log, nsys stats of a
/// 2.7B-parameter PyTorch LM, a Kineto trace of AlexNet on one A100 (as a torch_profiler run)
/// and the 2-rank NCCL all-reduce trace (as a stored analyze_trace result). Every figure is
/// real; the machines differ, so the combination is not one machine's.
pub fn gpu_session(root: &Root, name: &str, nccl: Nccl) -> String {
    let dir = root.path().join("profile_output").join(name);
    std::fs::create_dir_all(dir.join("r001-nvidia-smi-dmon")).unwrap();
    let dmon_rel = format!("profile_output/{name}/r001-nvidia-smi-dmon/dmon.txt");
    let dmon_text = read(&parse_fixture("nvidia_smi_dmon/h200-drv590-load.txt"));
    std::fs::write(root.path().join(&dmon_rel), &dmon_text).unwrap();
    let readings = system_profile_parse::nvidia_smi_dmon::parse(&dmon_text, 1.0).value;
    let gpu = system_profile_sample::gpu::GpuSeries::from_readings(&readings).summary(
        "nvidia-smi dmon",
        readings.samples.last().map(|s| s.t_s).unwrap_or(0.0),
        None,
    );
    let mut dmon = record(
        "r001-nvidia-smi-dmon",
        Method::NvidiaSmiDmon,
        RunMetrics {
            gpu: Some(gpu),
            ..RunMetrics::default()
        },
        vec![Artifact {
            path: dmon_rel,
            kind: ArtifactKind::Dmon,
            bytes: dmon_text.len() as u64,
        }],
    );
    dmon.argv = ["nvidia-smi", "dmon", "-s", "pucmt", "-d", "1"]
        .map(String::from)
        .to_vec();
    let topo = record(
        "r002-nvidia-smi-topo",
        Method::NvidiaSmiTopo,
        RunMetrics {
            topology: Some(
                system_profile_parse::nvidia_smi_topo::parse(&read(&parse_fixture(
                    "nvidia_smi_topo/h100-8gpu-nv18-with-legend.txt",
                )))
                .value,
            ),
            ..RunMetrics::default()
        },
        vec![Artifact {
            path: format!("profile_output/{name}/r002-nvidia-smi-topo/topo.txt"),
            kind: ArtifactKind::NvidiaSmiTopo,
            bytes: 0,
        }],
    );
    let nccl_file = match nccl {
        Nccl::A100Pcie => "nccl_debug/a100-pcie-2gpu-nccltests-coll-subsys.txt",
        Nccl::SocketFallback => "nccl_debug/aws-p4d-a100-4rank-ofi-fail-socket-fallback.txt",
    };
    let nccl_run = record(
        "r003-nccl-debug",
        Method::NcclDebug,
        RunMetrics {
            nccl: Some(
                system_profile_parse::nccl_debug::parse(&read(&parse_fixture(nccl_file))).value,
            ),
            ..RunMetrics::default()
        },
        vec![Artifact {
            path: format!("profile_output/{name}/r003-nccl-debug/nccl.host.1.log"),
            kind: ArtifactKind::NcclLog,
            bytes: 0,
        }],
    );
    let mut torch = record(
        "r004-torch-profiler",
        Method::TorchProfiler,
        RunMetrics {
            trace: Some(trace("kineto/hta-a100-alexnet-single.json.gz")),
            ..RunMetrics::default()
        },
        vec![Artifact {
            path: format!("profile_output/{name}/r004-torch-profiler/trace.json.gz"),
            kind: ArtifactKind::KinetoTrace,
            bytes: 0,
        }],
    );
    // The span of the trace's GPU work: what the run's wall time would at least be.
    torch.wall_s = torch
        .metrics
        .trace
        .as_ref()
        .map(|t| t.devices.iter().map(|d| d.span_us).fold(0.0, f64::max) * 1e-6);
    let nsys = record(
        "r005-nsys",
        Method::Nsys,
        RunMetrics {
            nsys: Some(
                system_profile_parse::nsys_stats::parse(&read(&parse_fixture(
                    "nsys_stats/pytorch-lm-2.7B-nsys2024.6-processing-format.txt",
                )))
                .value,
            ),
            ..RunMetrics::default()
        },
        vec![Artifact {
            path: format!("profile_output/{name}/r005-nsys/nsys-stats.txt"),
            kind: ArtifactKind::NsysStats,
            bytes: 0,
        }],
    );
    // DDP over gloo on two CPU ranks, rank 1 sleeping after each step: the runner's traces,
    // one per rank, side by side.
    let ddp_files: Vec<TraceFile> = (0..2)
        .map(|r| TraceFile {
            path: format!("profile_output/{name}/r006-torch-profiler/trace-rank{r}.json.gz"),
            bytes: 0,
            // The runner takes the rank from the rank's RANK: these traces carry none.
            analysis: system_profile_model::metrics::TraceAnalysis {
                rank: Some(r),
                ..trace(&format!("kineto/gloo-ddp-2rank-cpu-rank{r}.json.gz"))
            },
            node_rank: Some(0),
            diagnostics: Vec::new(),
        })
        .collect();
    let ddp = record(
        "r006-torch-profiler",
        Method::TorchProfiler,
        RunMetrics {
            trace: Some(ddp_files[0].analysis.clone()),
            ranks: Some(TraceReport {
                balance: system_profile_parse::kineto::rank_balance(&ddp_files),
                // One machine's ranks: the clocks line up within the collectives' bound of 0.
                alignment: system_profile_parse::kineto::align_clocks(&ddp_files).map(|mut a| {
                    a.merged_trace = Some(format!(
                        "profile_output/{name}/r006-torch-profiler/trace-merged.json.gz"
                    ));
                    a
                }),
                traces: ddp_files.clone(),
                stored: None,
            }),
            ..RunMetrics::default()
        },
        ddp_files
            .iter()
            .map(|f| Artifact {
                path: f.path.clone(),
                kind: ArtifactKind::KinetoTrace,
                bytes: 0,
            })
            .collect(),
    );
    let list = RunList {
        session: name.into(),
        dir: format!("profile_output/{name}"),
        logical_cpus: None,
        runs: vec![dmon, topo, nccl_run, torch, nsys, ddp],
        not_run: Vec::new(),
    };
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&list).unwrap(),
    )
    .unwrap();
    let rank0 = "crates/parse/tests/data/kineto/hta-a100-2rank-nccl-allreduce.json.gz";
    let stored = TraceReport {
        traces: vec![TraceFile {
            path: rank0.into(),
            bytes: 0,
            analysis: trace("kineto/hta-a100-2rank-nccl-allreduce.json.gz"),
            node_rank: None,
            diagnostics: Vec::new(),
        }],
        balance: None,
        alignment: None,
        stored: Some(format!("profile_output/{name}/traces/t001.json")),
    };
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    std::fs::write(
        dir.join("traces/t001.json"),
        serde_json::to_vec_pretty(&stored).unwrap(),
    )
    .unwrap();
    name.to_string()
}

/// A CPU training's torch.profiler run: Lightning's demo transformer (vocabulary 13,578) on
/// the CPU, its real trace. Its wall time is taken as its operators' self time, which a run
/// on one thread at least lasts: the rule's share of it is then an upper bound.
pub fn cpu_torch_session(root: &Root, name: &str) -> String {
    let dir = root.path().join("profile_output").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let analysis = trace("kineto/lightning-transformer-cpu.json.gz");
    let ops_s = analysis
        .cpu_ops
        .first()
        .map_or(0.0, |o| o.self_us * 100.0 / o.self_percent / 1e6);
    let mut torch = record(
        "r001-torch-profiler",
        Method::TorchProfiler,
        RunMetrics {
            trace: Some(analysis),
            ..RunMetrics::default()
        },
        vec![Artifact {
            path: format!("profile_output/{name}/r001-torch-profiler/trace.json.gz"),
            kind: ArtifactKind::KinetoTrace,
            bytes: 0,
        }],
    );
    torch.wall_s = Some(ops_s);
    let list = RunList {
        session: name.into(),
        dir: format!("profile_output/{name}"),
        logical_cpus: None,
        runs: vec![torch],
        not_run: Vec::new(),
    };
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&list).unwrap(),
    )
    .unwrap();
    name.to_string()
}
