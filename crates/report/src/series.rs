//! Time series read back from a run's sampler artifacts, for the charts and the "last"
//! readings: `procfs.jsonl` (the /proc sampler), `nvml.jsonl` (the NVML sampler) and
//! `dmon.txt` (nvidia-smi dmon).

use std::collections::BTreeMap;
use std::path::Path;
use system_profile_model::metrics::GpuSample;
use system_profile_model::run::ArtifactKind;
use system_profile_model::run::RunRecord;

/// One process tree over time, from `procfs.jsonl`.
#[derive(Debug, Clone, Default)]
pub struct TreeSeries {
    /// (seconds, resident bytes summed over the tree) at every tick.
    pub rss_bytes: Vec<(f64, f64)>,
    /// (seconds, cores busy since the previous counter reading) at the ticks that read CPU
    /// time.
    pub cpu_cores: Vec<(f64, f64)>,
}

impl TreeSeries {
    pub fn rss_last_bytes(&self) -> Option<u64> {
        self.rss_bytes.last().map(|p| p.1 as u64)
    }
}

/// One GPU quantity over time, per device.
pub type GpuSeries = BTreeMap<u32, Vec<(f64, f64)>>;

/// The GPUs over time, from `nvml.jsonl` or `dmon.txt`.
#[derive(Debug, Clone, Default)]
pub struct GpuTimeline {
    pub sm_util_percent: GpuSeries,
    pub mem_used_bytes: GpuSeries,
    /// PCIe and NVLink throughput, tx + rx, bytes per second.
    pub pcie_bytes_per_s: GpuSeries,
    pub nvlink_bytes_per_s: GpuSeries,
}

impl GpuTimeline {
    fn add(&mut self, s: &GpuSample) {
        let put = |series: &mut GpuSeries, v: Option<f64>| {
            if let Some(v) = v {
                series.entry(s.gpu).or_default().push((s.t_s, v));
            }
        };
        put(&mut self.sm_util_percent, s.sm_util_percent);
        put(&mut self.mem_used_bytes, s.mem_used_bytes.map(|b| b as f64));
        let sum = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        put(
            &mut self.pcie_bytes_per_s,
            sum(s.pcie_tx_bytes_per_s, s.pcie_rx_bytes_per_s),
        );
        put(
            &mut self.nvlink_bytes_per_s,
            sum(s.nvlink_tx_bytes_per_s, s.nvlink_rx_bytes_per_s),
        );
    }

    pub fn is_empty(&self) -> bool {
        self.sm_util_percent.is_empty()
            && self.mem_used_bytes.is_empty()
            && self.pcie_bytes_per_s.is_empty()
            && self.nvlink_bytes_per_s.is_empty()
    }
}

/// What one run's artifacts hold over time.
#[derive(Debug, Clone, Default)]
pub struct RunSeries {
    pub tree: Option<TreeSeries>,
    pub gpu: Option<GpuTimeline>,
    /// Each artifact's path, relative to the root, that the series came from.
    pub tree_artifact: Option<String>,
    pub gpu_artifact: Option<String>,
}

fn artifact(run: &RunRecord, kind: ArtifactKind) -> Option<&str> {
    run.artifacts
        .iter()
        .find(|a| a.kind == kind)
        .map(|a| a.path.as_str())
}

/// Read a run's sampler artifacts; a missing or unreadable one leaves its series out.
pub fn read(root: &Path, run: &RunRecord) -> RunSeries {
    let mut out = RunSeries::default();
    // Beneath the root only: a manifest may name any path.
    let Ok(fs) = system_profile_confine::Confined::open(root) else {
        return out;
    };
    if let Some(path) = artifact(run, ArtifactKind::ProcfsJsonl) {
        if let Ok(text) = fs.read_to_string(Path::new(path)) {
            out.tree = Some(tree_series(&text));
            out.tree_artifact = Some(path.to_string());
        }
    }
    if let Some(path) = artifact(run, ArtifactKind::NvmlJsonl) {
        if let Ok(text) = fs.read_to_string(Path::new(path)) {
            let mut g = GpuTimeline::default();
            for line in text.lines() {
                if let Ok(s) = serde_json::from_str::<GpuSample>(line) {
                    g.add(&s);
                }
            }
            out.gpu = (!g.is_empty()).then_some(g);
            out.gpu_artifact = Some(path.to_string());
        }
    } else if let Some(a) = run.artifacts.iter().find(|a| a.kind == ArtifactKind::Dmon) {
        if let Ok(text) = fs.read_to_string(Path::new(&a.path)) {
            // The interval the run asked dmon for (`-d N`), 1 s by default.
            let interval = run
                .argv
                .windows(2)
                .find(|w| w[0] == "-d")
                .and_then(|w| w[1].parse::<f64>().ok())
                .unwrap_or(1.0);
            let parsed = system_profile_parse::nvidia_smi_dmon::parse(&text, interval);
            let mut g = GpuTimeline::default();
            for s in &parsed.value.samples {
                g.add(s);
            }
            out.gpu = (!g.is_empty()).then_some(g);
            out.gpu_artifact = Some(a.path.clone());
        }
    }
    out
}

#[derive(serde::Deserialize)]
struct ProcLine {
    t_s: f64,
    pid: u32,
    rss_bytes: u64,
    #[serde(default)]
    cpu_user_s: Option<f64>,
    #[serde(default)]
    cpu_sys_s: Option<f64>,
}

/// One tick: seconds, the tree's resident bytes, and each process's CPU seconds so far.
type Tick = (f64, u64, Vec<(u32, f64)>);

/// Sum each tick's lines (one per process, the same `t_s`) into the tree's RSS, and the CPU
/// counters' growth between the ticks that read them into cores busy.
fn tree_series(text: &str) -> TreeSeries {
    let mut ticks: Vec<Tick> = Vec::new();
    for line in text.lines() {
        let Ok(l) = serde_json::from_str::<ProcLine>(line) else {
            continue;
        };
        if ticks.last().is_none_or(|t| t.0 != l.t_s) {
            ticks.push((l.t_s, 0, Vec::new()));
        }
        if let Some(t) = ticks.last_mut() {
            t.1 += l.rss_bytes;
            if let (Some(u), Some(s)) = (l.cpu_user_s, l.cpu_sys_s) {
                t.2.push((l.pid, u + s));
            }
        }
    }
    let mut out = TreeSeries {
        rss_bytes: ticks.iter().map(|t| (t.0, t.1 as f64)).collect(),
        cpu_cores: Vec::new(),
    };
    let mut last: Option<(f64, BTreeMap<u32, f64>)> = None;
    for (t, _, cpu) in ticks.iter().filter(|t| !t.2.is_empty()) {
        let now: BTreeMap<u32, f64> = cpu.iter().copied().collect();
        if let Some((t0, before)) = &last {
            let dt = t - t0;
            if dt > 0.0 {
                // A process first seen now counts from zero: its whole CPU time is new.
                let used = now.iter().fold(0.0, |a, (pid, c)| {
                    a + (c - before.get(pid).copied().unwrap_or(0.0)).max(0.0)
                });
                out.cpu_cores.push((*t, used / dt));
            }
        }
        last = Some((*t, now));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_sum_over_the_tree_and_cpu_is_a_rate() {
        let text = "\
{\"t_s\":0.0,\"pid\":1,\"rss_bytes\":100,\"cpu_user_s\":0.00,\"cpu_sys_s\":0.00,\"threads\":1}
{\"t_s\":0.0,\"pid\":2,\"rss_bytes\":50,\"cpu_user_s\":0.00,\"cpu_sys_s\":0.00,\"threads\":1}
{\"t_s\":0.5,\"pid\":1,\"rss_bytes\":120}
{\"t_s\":1.0,\"pid\":1,\"rss_bytes\":130,\"cpu_user_s\":0.80,\"cpu_sys_s\":0.10,\"threads\":1}
{\"t_s\":1.0,\"pid\":2,\"rss_bytes\":70,\"cpu_user_s\":0.50,\"cpu_sys_s\":0.00,\"threads\":1}
not json
";
        let s = tree_series(text);
        assert_eq!(s.rss_bytes, vec![(0.0, 150.0), (0.5, 120.0), (1.0, 200.0)]);
        assert_eq!(s.cpu_cores.len(), 1);
        assert!((s.cpu_cores[0].1 - 1.4).abs() < 1e-9);
        assert_eq!(s.rss_last_bytes(), Some(200));
    }
}
