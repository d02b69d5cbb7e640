//! Detection for system-profile: which profilers exist and are usable here (PATH, versions,
//! permissions such as perf_event_paranoid, ptrace_scope and capabilities, containers), the
//! hardware and its topology (procfs, sysfs, NVML, `nvidia-smi topo -m`) and the Python
//! environment the target will use. A missing tool, GPU or permission is data, never an error.

mod catalog;
mod gpu;
#[cfg(target_os = "linux")]
mod linux;
mod probe;
mod python;
mod version;

pub use catalog::{catalog, ToolSpec};
pub use version::extract_version;

#[cfg(target_os = "linux")]
pub use linux::procfs::{parse_cpuinfo, parse_meminfo};

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use system_profile_model::detect::{DetectReport, DetectSummary};

/// Called once as each part of the detection finishes, with the part's name
/// (`permissions`, `container`, `hardware`, `gpu`, `python`, `tools`).
pub type PartDone = Arc<dyn Fn(&'static str) + Send + Sync>;

/// The parts `detect` runs in parallel, in the order they are named to `PartDone`'s caller.
pub const DETECT_PARTS: [&str; 6] = [
    "permissions",
    "container",
    "hardware",
    "gpu",
    "python",
    "tools",
];

/// How to detect.
#[derive(Clone)]
pub struct DetectOptions {
    /// The Python interpreter the target will use (a path or a name on PATH).
    pub python: String,
    /// Limit for each probe; torch's import gets four times this.
    pub probe_timeout: Duration,
    /// Told as each part finishes (progress for long detections); `None` to stay quiet.
    pub on_part_done: Option<PartDone>,
}

impl std::fmt::Debug for DetectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetectOptions")
            .field("python", &self.python)
            .field("probe_timeout", &self.probe_timeout)
            .field("on_part_done", &self.on_part_done.is_some())
            .finish()
    }
}

impl Default for DetectOptions {
    fn default() -> Self {
        DetectOptions {
            python: "python3".to_string(),
            probe_timeout: Duration::from_secs(5),
            on_part_done: None,
        }
    }
}

/// Await `fut`, then tell `on_done` that `part` is finished.
async fn part<T>(
    part: &'static str,
    on_done: Option<&PartDone>,
    fut: impl Future<Output = T>,
) -> T {
    let value = fut.await;
    if let Some(tell) = on_done {
        tell(part);
    }
    value
}

/// How much longer the second try of a timed-out probe may take.
const RETRY_FACTOR: u32 = 4;

/// Run a probe; one that timed out is tried again with a deadline `RETRY_FACTOR` times
/// longer: on a busy machine a slow start is not a missing tool. The outcome, and whether it
/// timed out both times (then what it says is not known yet, and the report is not cached).
pub(crate) async fn run_patiently(
    spec: &system_profile_exec::CommandSpec,
    timeout: Duration,
) -> (
    Result<system_profile_exec::Outcome, system_profile_exec::ExecError>,
    bool,
) {
    use system_profile_exec::{run, ExitKind, RunOptions};
    let first = run(spec, &RunOptions::with_timeout(timeout)).await;
    if !matches!(&first, Ok(o) if o.exit == ExitKind::TimedOut) {
        return (first, false);
    }
    let second = run(spec, &RunOptions::with_timeout(timeout * RETRY_FACTOR)).await;
    let timed_out = matches!(&second, Ok(o) if o.exit == ExitKind::TimedOut);
    (second, timed_out)
}

/// The sentence for a probe that timed out twice.
pub(crate) fn not_known_yet(what: &str, timeout: Duration) -> String {
    format!(
        "not known yet: {what} timed out twice ({:.0} s, then {:.0} s): the machine is busy; call detect_tools again with refresh: true",
        timeout.as_secs_f64(),
        (timeout * RETRY_FACTOR).as_secs_f64()
    )
}

/// Run every probe in parallel, each under its own timeout, and assemble the report.
pub async fn detect(opts: &DetectOptions) -> DetectReport {
    let started = Instant::now();
    let mut diagnostics = Vec::new();

    #[cfg(not(target_os = "linux"))]
    compile_error!("system-profile-detect reads /proc and /sys: Linux only");

    let tell = opts.on_part_done.as_ref();
    let [p_perm, p_cont, p_hw, p_gpu, p_py, p_tools] = DETECT_PARTS;
    let permissions_fut = part(
        p_perm,
        tell,
        tokio::task::spawn_blocking(linux::permissions::read),
    );
    let container_fut = part(
        p_cont,
        tell,
        tokio::task::spawn_blocking(linux::container::read),
    );
    let hardware_fut = part(
        p_hw,
        tell,
        tokio::task::spawn_blocking(linux::hardware::read),
    );
    let gpu_fut = part(p_gpu, tell, gpu::probe(opts.probe_timeout));
    let python_fut = part(p_py, tell, python::probe(&opts.python, opts.probe_timeout));
    let host_fut = part(
        p_tools,
        tell,
        probe::probe_host_tools(&opts.python, opts.probe_timeout),
    );

    let (permissions, container, hardware, gpu, python, host) = tokio::join!(
        permissions_fut,
        container_fut,
        hardware_fut,
        gpu_fut,
        python_fut,
        host_fut
    );
    let permissions = permissions.unwrap_or_else(|e| {
        diagnostics.push(format!("permissions probe failed: {e}"));
        linux::permissions::unknown()
    });
    let container = container.unwrap_or_default();
    let mut hardware = hardware.unwrap_or_else(|e| {
        diagnostics.push(format!("hardware probe failed: {e}"));
        linux::hardware::unknown()
    });
    diagnostics.extend(gpu.diagnostics.iter().cloned());
    diagnostics.extend(python.diagnostics.iter().cloned());
    diagnostics.extend(host.diagnostics.iter().cloned());

    let tools = probe::assemble(&host, &python, &permissions, &gpu);
    hardware.gpu = gpu.env;
    let summary = DetectSummary {
        checked: tools.len(),
        available: tools.iter().filter(|t| t.available).count(),
        usable: tools.iter().filter(|t| t.usable).count(),
        unusable: tools
            .iter()
            .filter(|t| t.available && !t.usable)
            .map(|t| t.id.clone())
            .collect(),
    };
    DetectReport {
        tools,
        hardware,
        permissions,
        container,
        python: python.env,
        summary,
        probe_wall_ms: started.elapsed().as_secs_f64() * 1e3,
        cached: false,
        detected_at_unix_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        timed_out: python
            .timed_out
            .iter()
            .chain(host.timed_out.iter())
            .cloned()
            .collect(),
        diagnostics,
    }
}

#[cfg(test)]
mod patience {
    use super::*;
    use system_profile_exec::{CommandSpec, ExitKind};

    #[tokio::test]
    async fn a_slow_probe_gets_a_longer_second_try_and_a_hung_one_is_not_known_yet() {
        // Slower than the first deadline, well within the second (4x).
        let slow = CommandSpec::new(["sleep", "0.3"]);
        let (outcome, late) = run_patiently(&slow, Duration::from_millis(150)).await;
        assert!(!late);
        assert!(outcome.unwrap().exit.success());
        // Slower than both.
        let hung = CommandSpec::new(["sleep", "30"]);
        let (outcome, late) = run_patiently(&hung, Duration::from_millis(100)).await;
        assert!(late);
        assert_eq!(outcome.unwrap().exit, ExitKind::TimedOut);
        let says = not_known_yet("the torch probe", Duration::from_secs(5));
        assert!(says.starts_with("not known yet"), "{says}");
        assert!(says.contains("refresh"), "{says}");
    }
}
