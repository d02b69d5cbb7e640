//! Recommendations: each rule reads the measured rows and fires only when its thresholds
//! (the constants below) are crossed, with the rows it rests on as evidence, the gain it
//! estimates and how. The report orders them by `impact`.

use crate::session::Session;
use system_profile_model::report::{Confidence, Gain, Lang, Recommendation, Report, Source};

/// A Python function of the user's code holding at least this share of samples (self), and
/// at least this share of its run's wall time.
pub const HOT_FUNCTION_SELF_PERCENT: f64 = 15.0;
pub const HOT_FUNCTION_WALL_SHARE: f64 = 0.1;
/// Nor one whose own time is under this: not worth a change, and a handful of samples.
pub const HOT_FUNCTION_MIN_SELF_S: f64 = 0.1;
/// A hot function called at least this many times (cProfile), each under this much of its own
/// time, costs by its number of calls; one whose calls each take at least `LONG_CALL_S`, by its
/// body.
pub const MANY_CALLS: u64 = 10_000;
pub const SHORT_CALL_S: f64 = 100e-6;
pub const LONG_CALL_S: f64 = 1e-3;
/// Host↔device copies: at least `COPIES_MIN_PAGEABLE` of them pageable for at least
/// `COPIES_PAGEABLE_SHARE`, or at least `COPIES_MIN_SMALL` this small on average.
pub const COPIES_MIN_PAGEABLE: u64 = 10;
pub const COPIES_MIN_SMALL: u64 = 1000;
pub const COPIES_PAGEABLE_SHARE: f64 = 0.5;
pub const COPIES_SMALL_BYTES: f64 = 1024.0 * 1024.0;
/// Copies reaching under this share of what pinned copies reach.
pub const COPIES_SLOW_SHARE: f64 = 0.5;
/// What pinned, batched copies reach of the PCIe peak per direction (measured on H100 and
/// A100 by the nvbandwidth and CUDA bandwidthTest figures, 80-90%).
pub const PINNED_SHARE_OF_PCIE_PEAK: f64 = 0.8;
/// Without a known GPU model: PCIe Gen4 x16's 31.5 GB/s at that share.
pub const PINNED_FALLBACK_GBPS: f64 = 25.0;
/// A GPU idle for at least this share of the traced span.
pub const GPU_IDLE_PERCENT: f64 = 30.0;
/// Launch-bound: this share of kernels under 10 µs, with at least this many launches.
pub const SHORT_KERNELS_PERCENT: f64 = 50.0;
pub const LAUNCHES_MIN: u64 = 1000;
/// Communication exposed: less than this share hidden under compute, and comm at least this
/// share of compute.
pub const COMM_OVERLAP_PERCENT: f64 = 50.0;
pub const COMM_COMPUTE_RATIO: f64 = 0.1;
/// Tensors held twice (on CPU and GPU, or twice on one place): at least this many bytes.
pub const DUPLICATED_MIN_BYTES: u64 = 16 << 20;
/// A user function sampled inside one blocking call for at least this share of the samples.
pub const WAITING_CALL_PERCENT: f64 = 30.0;
/// CPU contention: at least this share of what a program wanted to run (on a CPU plus on a
/// run queue) spent runnable but not running, and at least this long.
pub const CONTENTION_SHARE: f64 = 0.2;
pub const CONTENTION_MIN_S: f64 = 0.5;
/// A process mostly blocked: under this many cores busy or runnable, over at least this wall
/// time.
pub const WAITING_CORES: f64 = 0.5;
pub const WAITING_MIN_WALL_S: f64 = 1.0;
/// Syscalls taking at least this share of the wall time (strace -c); or, with at least
/// `SYSCALL_MIN_CALLS` calls, the kernel's share of the CPU time at least `SYS_SHARE_OF_CPU`.
pub const SYSCALL_SHARE: f64 = 0.2;
pub const SYSCALL_MIN_CALLS: u64 = 10_000;
pub const SYS_SHARE_OF_CPU: f64 = 0.5;
/// A context-switch storm in a started command's unprofiled run: at least this many switches
/// of both kinds, at least this many a second of wall time (50 times what py-spy observing by
/// PID adds), each with at most this much CPU time, and at least this share of the CPU time in
/// the kernel. A CPU-bound program switches a few hundred times a second;
/// ProcessPoolExecutor.map over tiny tasks 11,000 times a second at 81 µs each, with 31% of
/// its CPU time in the kernel.
pub const SWITCH_STORM_MIN: u64 = 50_000;
pub const SWITCH_STORM_PER_S: f64 = 5_000.0;
pub const SWITCH_STORM_MAX_CPU_PER_SWITCH_S: f64 = 200e-6;
pub const SWITCH_STORM_SYS_SHARE: f64 = 0.2;
/// Threads taking turns with the GIL (py-spy `--gil --threads`): held at least this share of
/// the run, by at least two threads with this share of the samples each, in a run that kept no
/// more than this many cores busy (four CPU-bound threads of pure Python: held 99%, about 25%
/// each, 1.0 core).
pub const GIL_HELD_SHARE: f64 = 0.8;
pub const GIL_THREAD_SHARE: f64 = 0.1;
pub const GIL_BOUND_MAX_CORES: f64 = 1.3;
/// GPU memory imbalance: the fullest device over the emptiest.
pub const GPU_MEMORY_RATIO: f64 = 1.3;
/// Large buffers made and freed again: at least this many bytes of them at the program's
/// lines, in a run whose unprofiled twin spent at least this share of its CPU time in the
/// kernel with at least this many minor page faults.
pub const CHURN_MIN_BYTES: u64 = 1 << 30;
pub use system_profile_model::plan::{CHURN_MIN_MINOR_FAULTS, CHURN_SYS_SHARE};
/// One allocation site holding this share of the Python heap's peak, and at least this much.
pub const ALLOC_SITE_SHARE: f64 = 0.25;
pub const ALLOC_SITE_MIN_BYTES: u64 = 32 << 20;

/// A serving window: requests queued for at least this share of their end-to-end time; a KV
/// cache at least this full; prefill at least this share of the time to first token and this
/// long (a 10 ms prefill is no change worth flags); at least this share of a client's TTFT (and
/// this long) passing before the engine saw the request, or the API server's process wanting
/// at least this many cores (one process: one core is all it can use).
pub const SERVING_QUEUE_SHARE: f64 = 0.2;
pub const SERVING_KV_FULL_PERCENT: f64 = 90.0;
pub const SERVING_PREFILL_SHARE_OF_TTFT: f64 = 0.5;
pub const SERVING_PREFILL_MIN_S: f64 = 0.05;
pub const SERVING_OUTSIDE_SHARE: f64 = 0.5;
pub const SERVING_OUTSIDE_MIN_S: f64 = 0.02;
pub const SERVING_API_SERVER_CORES: f64 = 0.9;

/// A rule: its id and the check that turns rows into drafts.
mod churn;
mod cpu;
mod gil;
mod gpu;
mod memory;
mod native;
mod ranks;
mod serving;
mod switches;
mod torch;

use churn::*;
use cpu::*;
use gil::*;
use gpu::*;
use memory::*;
use native::*;
use ranks::*;
pub(crate) use serving::API_SERVER;
use serving::*;
use switches::*;
use torch::*;
pub(crate) use torch::{slowdown, TORCH_DISTURBED_RATIO};

pub struct Rule {
    pub id: &'static str,
    pub check: fn(&Inputs) -> Vec<Draft>,
    pub about: About,
}

/// What a rule's advice changes: the user's program, or where it was measured. Advice about
/// the program comes first whatever the impacts: a busy machine is a caveat on every figure,
/// not a change to the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum About {
    Program,
    Environment,
}

/// What a rule reads.
pub struct Inputs<'a> {
    pub session: &'a Session,
    pub report: &'a Report,
    pub lang: Lang,
}

/// A recommendation before it is ranked.
pub struct Draft {
    pub title: String,
    pub action: String,
    pub evidence: Vec<String>,
    pub sources: Vec<Source>,
    pub gain: Gain,
    /// What the memory gain is a share of.
    pub memory_of_bytes: Option<u64>,
    /// What the time gain is a share of.
    pub wall_of_s: Option<f64>,
    pub confidence: Confidence,
}

impl Draft {
    /// The rest of a draft that saves `gain_s` of `wall_s`.
    fn saves_time(gain_s: f64, wall_s: Option<f64>) -> Draft {
        Draft {
            gain: Gain {
                time_s: Some(gain_s),
                ..Gain::default()
            },
            wall_of_s: wall_s,
            ..Draft::empty()
        }
    }

    /// The rest of a draft that frees `percent` of a process's CPU time.
    fn saves_cpu(percent: f64) -> Draft {
        Draft {
            gain: Gain {
                cpu_percent: Some(percent),
                ..Gain::default()
            },
            ..Draft::empty()
        }
    }

    /// The rest of a draft that frees `bytes` of `of_bytes`.
    fn saves_memory(bytes: u64, of_bytes: Option<u64>) -> Draft {
        Draft {
            gain: Gain {
                memory_bytes: Some(bytes),
                ..Gain::default()
            },
            memory_of_bytes: of_bytes,
            ..Draft::empty()
        }
    }

    fn empty() -> Draft {
        Draft {
            title: String::new(),
            action: String::new(),
            evidence: Vec::new(),
            sources: Vec::new(),
            gain: Gain::default(),
            memory_of_bytes: None,
            wall_of_s: None,
            confidence: Confidence::Low,
        }
    }
}

/// Every rule, in no particular order: the report ranks what fires.
pub const RULES: &[Rule] = &[
    Rule {
        id: "hot_python_function",
        check: hot_python_function,
        about: About::Program,
    },
    Rule {
        id: "hot_library_call",
        check: hot_library_call,
        about: About::Program,
    },
    Rule {
        id: "hot_native_call",
        check: hot_native_call,
        about: About::Program,
    },
    Rule {
        id: "hot_torch_operators",
        check: hot_torch_operators,
        about: About::Program,
    },
    Rule {
        id: "pageable_or_small_copies",
        check: pageable_or_small_copies,
        about: About::Program,
    },
    Rule {
        id: "gpu_idle",
        check: gpu_idle,
        about: About::Program,
    },
    Rule {
        id: "launch_bound",
        check: launch_bound,
        about: About::Program,
    },
    Rule {
        id: "exposed_communication",
        check: exposed_communication,
        about: About::Program,
    },
    Rule {
        id: "duplicated_tensors",
        check: duplicated_tensors,
        about: About::Program,
    },
    Rule {
        id: "waiting_process",
        check: waiting_process,
        about: About::Program,
    },
    Rule {
        id: "waiting_call",
        check: waiting_call,
        about: About::Program,
    },
    Rule {
        id: "cpu_contention",
        check: cpu_contention,
        about: About::Environment,
    },
    Rule {
        id: "gil_bound_threads",
        check: gil_bound_threads,
        about: About::Program,
    },
    Rule {
        id: "context_switch_storm",
        check: context_switch_storm,
        about: About::Program,
    },
    Rule {
        id: "syscall_heavy",
        check: syscall_heavy,
        about: About::Program,
    },
    Rule {
        id: "gpu_memory_imbalance",
        check: gpu_memory_imbalance,
        about: About::Program,
    },
    Rule {
        id: "python_allocation_site",
        check: python_allocation_site,
        about: About::Program,
    },
    Rule {
        id: "large_buffer_churn",
        check: large_buffer_churn,
        about: About::Program,
    },
    Rule {
        id: "straggler_rank",
        check: straggler_rank,
        about: About::Program,
    },
    Rule {
        id: "straggler_across_nodes",
        check: straggler_across_nodes,
        about: About::Program,
    },
    Rule {
        id: "nccl_socket_fallback",
        check: nccl_socket_fallback,
        about: About::Program,
    },
    Rule {
        id: "serving_queue_bound",
        check: serving_queue_bound,
        about: About::Program,
    },
    Rule {
        id: "serving_kv_cache_pressure",
        check: serving_kv_cache_pressure,
        about: About::Program,
    },
    Rule {
        id: "serving_prefill_bound",
        check: serving_prefill_bound,
        about: About::Program,
    },
    Rule {
        id: "serving_api_server_bound",
        check: serving_api_server_bound,
        about: About::Program,
    },
];

fn weight(c: Confidence) -> f64 {
    match c {
        Confidence::High => 1.0,
        Confidence::Medium => 0.6,
        Confidence::Low => 0.3,
    }
}

/// Run every rule, fill in the shares, and order by impact (largest first).
pub fn recommend(inputs: &Inputs) -> Vec<Recommendation> {
    let mut out = Vec::new();
    for rule in RULES {
        for mut d in (rule.check)(inputs) {
            // No gain exceeds what it is a share of.
            if let (Some(t), Some(w)) = (d.gain.time_s.as_mut(), d.wall_of_s) {
                *t = t.min(w);
                if w > 0.0 {
                    d.gain.wall_percent = Some(*t / w * 100.0);
                }
            }
            if let (Some(m), Some(of)) = (d.gain.memory_bytes.as_mut(), d.memory_of_bytes) {
                *m = (*m).min(of);
                if of > 0 {
                    d.gain.memory_percent = Some(*m as f64 / of as f64 * 100.0);
                }
            }
            if let Some(c) = d.gain.cpu_percent.as_mut() {
                *c = c.clamp(0.0, 100.0);
            }
            let share = d
                .gain
                .wall_percent
                .unwrap_or(0.0)
                .max(d.gain.memory_percent.unwrap_or(0.0))
                .max(d.gain.cpu_percent.unwrap_or(0.0))
                / 100.0;
            out.push(Recommendation {
                rule: rule.id.into(),
                title: d.title,
                action: d.action,
                evidence: d.evidence,
                sources: d.sources,
                impact: share * weight(d.confidence),
                gain: d.gain,
                confidence: d.confidence,
            });
        }
    }
    // Program advice first, then by impact; stable: equal impacts keep the rules' order.
    let about = |id: &str| RULES.iter().find(|r| r.id == id).map(|r| r.about);
    out.sort_by(|a, b| {
        about(&a.rule)
            .cmp(&about(&b.rule))
            .then(b.impact.total_cmp(&a.impact))
    });
    out
}

/// The wall time of a run, or of the longest run.
pub(super) fn wall_of(inputs: &Inputs, run_id: &str) -> Option<f64> {
    inputs
        .report
        .cpu
        .iter()
        .find(|r| r.run_id == run_id)
        .and_then(|r| r.wall_s)
        .or_else(|| {
            inputs
                .session
                .runs
                .iter()
                .find(|r| r.run_id == run_id)
                .and_then(|r| r.wall_s)
        })
}
