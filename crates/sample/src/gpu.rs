//! GPU readings turned into a run's summary: per device, every quantity's mean, p50, p95,
//! min and max; the processes seen with their peak memory; and how evenly the GPUs were
//! used. The same code serves the NVML sampler and the nvidia-smi dmon / query parsers, so a
//! figure means the same whichever tool read it.

use std::collections::BTreeMap;
use system_profile_model::metrics::{
    GpuBalance, GpuDeviceFacts, GpuDeviceSummary, GpuProcessMemory, GpuReadings, GpuSample,
    GpuSummary, SeriesStats,
};
use system_profile_model::peaks::{gpu_peaks, pcie_gbps_per_direction, PeakUse};

/// Values kept per quantity for the percentiles; past this a uniform reservoir stands in for
/// them (mean, min and max stay exact). At 10 Hz that is almost three hours.
const RESERVOIR: usize = 100_000;

/// One quantity's running statistics.
#[derive(Debug, Clone, Default)]
struct Running {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    kept: Vec<f64>,
    /// xorshift state for the reservoir: deterministic, so the same input gives the same
    /// summary.
    rng: u64,
}

impl Running {
    fn add(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        if self.count == 0 {
            self.min = v;
            self.max = v;
            self.rng = 0x9E37_79B9_7F4A_7C15;
        }
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if self.kept.len() < RESERVOIR {
            self.kept.push(v);
        } else {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let slot = self.rng % self.count;
            if (slot as usize) < RESERVOIR {
                self.kept[slot as usize] = v;
            }
        }
    }

    fn stats(&self) -> Option<SeriesStats> {
        if self.count == 0 {
            return None;
        }
        let mut sorted = self.kept.clone();
        sorted.sort_by(f64::total_cmp);
        // Nearest rank: the smallest value with at least q of the samples at or below it.
        let rank = |q: f64| {
            let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[i]
        };
        Some(SeriesStats {
            samples: self.count,
            mean: self.sum / self.count as f64,
            p50: rank(0.5),
            p95: rank(0.95),
            min: self.min,
            max: self.max,
        })
    }
}

#[derive(Debug, Default)]
struct Device {
    facts: GpuDeviceFacts,
    series: BTreeMap<&'static str, Running>,
    /// pid → (name, peak bytes)
    processes: BTreeMap<u32, (Option<String>, u64)>,
}

/// Readings in, summary out.
#[derive(Debug, Default)]
pub struct GpuSeries {
    devices: BTreeMap<u32, Device>,
    samples: u64,
}

impl GpuSeries {
    pub fn new() -> GpuSeries {
        GpuSeries::default()
    }

    /// Name, UUID and memory size of a device, for the summary.
    pub fn set_facts(&mut self, facts: GpuDeviceFacts) {
        let gpu = facts.gpu;
        self.devices.entry(gpu).or_default().facts = facts;
    }

    /// Everything a tool's output said (nvidia-smi dmon or query).
    pub fn from_readings(readings: &GpuReadings) -> GpuSeries {
        let mut series = GpuSeries::new();
        for f in &readings.devices {
            series.set_facts(f.clone());
        }
        for s in &readings.samples {
            series.add(s);
        }
        for p in &readings.processes {
            if let (Some(gpu), Some(bytes)) = (p.gpu, p.used_memory_bytes) {
                series.add_process(gpu, p.pid, p.name.clone(), bytes);
            }
        }
        series
    }

    pub fn add(&mut self, s: &GpuSample) {
        self.samples += 1;
        let d = self.devices.entry(s.gpu).or_default();
        if d.facts.mem_total_bytes.is_none() {
            d.facts.mem_total_bytes = s.mem_total_bytes;
        }
        let fields: [(&'static str, Option<f64>); 11] = [
            ("sm_util_percent", s.sm_util_percent),
            ("mem_util_percent", s.mem_util_percent),
            ("mem_used_bytes", s.mem_used_bytes.map(|b| b as f64)),
            ("pcie_tx_bytes_per_s", s.pcie_tx_bytes_per_s),
            ("pcie_rx_bytes_per_s", s.pcie_rx_bytes_per_s),
            ("nvlink_tx_bytes_per_s", s.nvlink_tx_bytes_per_s),
            ("nvlink_rx_bytes_per_s", s.nvlink_rx_bytes_per_s),
            ("power_w", s.power_w),
            ("sm_clock_mhz", s.sm_clock_mhz),
            ("mem_clock_mhz", s.mem_clock_mhz),
            ("temperature_c", s.temperature_c),
        ];
        for (name, value) in fields {
            if let Some(v) = value {
                d.series.entry(name).or_default().add(v);
            }
        }
    }

    /// A process seen on `gpu` holding `used_bytes` of its memory.
    pub fn add_process(&mut self, gpu: u32, pid: u32, name: Option<String>, used_bytes: u64) {
        let d = self.devices.entry(gpu).or_default();
        let entry = d.processes.entry(pid).or_insert((None, 0));
        if entry.0.is_none() {
            entry.0 = name;
        }
        entry.1 = entry.1.max(used_bytes);
    }

    pub fn summary(&self, source: &str, wall_s: f64, rate_hz_requested: Option<f64>) -> GpuSummary {
        let devices: Vec<GpuDeviceSummary> = self
            .devices
            .iter()
            .map(|(gpu, d)| {
                let mut processes: Vec<GpuProcessMemory> = d
                    .processes
                    .iter()
                    .map(|(pid, (name, peak))| GpuProcessMemory {
                        pid: *pid,
                        name: name.clone(),
                        used_memory_peak_bytes: *peak,
                    })
                    .collect();
                processes.sort_by_key(|p| std::cmp::Reverse(p.used_memory_peak_bytes));
                let vs_peak = peaks_of(&d.facts, &d.series);
                GpuDeviceSummary {
                    vs_peak,
                    gpu: *gpu,
                    name: d.facts.name.clone(),
                    uuid: d.facts.uuid.clone(),
                    mem_total_bytes: d.facts.mem_total_bytes,
                    series: d
                        .series
                        .iter()
                        .filter_map(|(k, r)| Some((k.to_string(), r.stats()?)))
                        .collect(),
                    processes,
                }
            })
            .collect();
        let ticks = self
            .devices
            .values()
            .map(|d| d.series.values().map(|r| r.count).max().unwrap_or(0))
            .max()
            .unwrap_or(0);
        GpuSummary {
            source: source.to_string(),
            wall_s,
            samples: self.samples,
            rate_hz_requested,
            rate_hz_achieved: (wall_s > 0.0 && ticks > 0).then(|| ticks as f64 / wall_s),
            balance: balance(&devices),
            devices,
            sampler_cpu_s: None,
        }
    }
}

/// PCIe and NVLink rates (mean and largest) against the link's peak: PCIe from the link the
/// device reports, else the datasheet's; NVLink from the datasheet.
fn peaks_of(facts: &GpuDeviceFacts, series: &BTreeMap<&'static str, Running>) -> Vec<PeakUse> {
    let model = facts.name.as_deref().and_then(gpu_peaks);
    let pcie = match (facts.pcie_gen, facts.pcie_width) {
        (Some(g), Some(w)) => {
            pcie_gbps_per_direction(g, w).map(|p| (p, format!("the device: PCIe gen {g} x{w}")))
        }
        _ => model.and_then(|m| {
            pcie_gbps_per_direction(m.pcie_gen, m.pcie_width).map(|p| {
                (
                    p,
                    format!(
                        "datasheet: {} (PCIe gen {} x{})",
                        m.name_contains, m.pcie_gen, m.pcie_width
                    ),
                )
            })
        }),
    };
    let nvlink = model.and_then(|m| {
        m.nvlink_gbps_per_direction.map(|p| {
            (
                p,
                format!("datasheet: {} NVLink per direction", m.name_contains),
            )
        })
    });
    let mut out = Vec::new();
    // NVML's (and nvidia-smi's) utilisations are shares of time, not of throughput: say so.
    for (field, what) in [
        ("sm_util_percent", "share of the sample period with a kernel running (not of the SMs' throughput)"),
        ("mem_util_percent", "share of the sample period with device memory being read or written (not of its bandwidth)"),
    ] {
        if let Some(stats) = series.get(field).and_then(Running::stats) {
            out.push(PeakUse::new(format!("{field} mean"), stats.mean, 100.0, "% of time", format!("NVML: {what}")));
        }
    }
    for (field, peak) in [
        ("pcie_tx_bytes_per_s", &pcie),
        ("pcie_rx_bytes_per_s", &pcie),
        ("nvlink_tx_bytes_per_s", &nvlink),
        ("nvlink_rx_bytes_per_s", &nvlink),
    ] {
        let (Some(stats), Some((peak, source))) =
            (series.get(field).and_then(Running::stats), peak)
        else {
            continue;
        };
        for (which, value) in [("mean", stats.mean), ("max", stats.max)] {
            out.push(PeakUse::new(
                format!("{field} {which}"),
                value / 1e9,
                *peak,
                "GB/s",
                source.clone(),
            ));
        }
    }
    out
}

/// Spread of utilisation and memory over two or more GPUs.
fn balance(devices: &[GpuDeviceSummary]) -> Option<GpuBalance> {
    if devices.len() < 2 {
        return None;
    }
    let util: Vec<(u32, f64)> = devices
        .iter()
        .filter_map(|d| Some((d.gpu, d.series.get("sm_util_percent")?.mean)))
        .collect();
    let busiest = util.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1));
    let idlest = util.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1));
    let mem: Vec<u64> = devices
        .iter()
        .filter_map(|d| Some(d.series.get("mem_used_bytes")?.max as u64))
        .collect();
    let (mem_max, mem_min) = (mem.iter().max().copied(), mem.iter().min().copied());
    Some(GpuBalance {
        busiest_gpu: busiest.map(|b| b.0),
        idlest_gpu: idlest.map(|i| i.0),
        sm_util_spread_points: busiest.zip(idlest).map(|(b, i)| b.1 - i.1),
        mem_used_peak_max_bytes: mem_max,
        mem_used_peak_min_bytes: mem_min,
        mem_used_peak_ratio: match (mem_max, mem_min) {
            (Some(hi), Some(lo)) if lo > 0 => Some(hi as f64 / lo as f64),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(gpu: u32, t_s: f64, util: f64, mem: u64) -> GpuSample {
        GpuSample {
            t_s,
            gpu,
            sm_util_percent: Some(util),
            mem_used_bytes: Some(mem),
            ..Default::default()
        }
    }

    #[test]
    fn percentiles_by_nearest_rank_and_balance() {
        let mut s = GpuSeries::new();
        for i in 1..=100 {
            s.add(&sample(0, i as f64 / 10.0, i as f64, 1000));
            s.add(&sample(1, i as f64 / 10.0, 10.0, 4000));
        }
        s.add_process(1, 42, Some("python3".into()), 3000);
        s.add_process(1, 42, None, 3500);
        s.add_process(1, 7, None, 100);
        let sum = s.summary("test", 10.0, Some(10.0));
        let u = sum.devices[0].series["sm_util_percent"];
        assert_eq!(
            (u.samples, u.p50, u.p95, u.min, u.max),
            (100, 50.0, 95.0, 1.0, 100.0)
        );
        assert!((u.mean - 50.5).abs() < 1e-9);
        assert_eq!(sum.samples, 200);
        assert_eq!(sum.rate_hz_achieved, Some(10.0));
        let p = &sum.devices[1].processes;
        assert_eq!((p[0].pid, p[0].used_memory_peak_bytes), (42, 3500));
        assert_eq!(p[0].name.as_deref(), Some("python3"));
        let b = sum.balance.unwrap();
        assert_eq!((b.busiest_gpu, b.idlest_gpu), (Some(0), Some(1)));
        assert!((b.sm_util_spread_points.unwrap() - 40.5).abs() < 1e-9);
        assert_eq!(b.mem_used_peak_ratio, Some(4.0));
    }

    #[test]
    fn a_long_run_keeps_exact_extremes_and_close_percentiles() {
        let mut r = Running::default();
        let n = 3 * RESERVOIR as u64;
        for i in 0..n {
            r.add((i % 1000) as f64);
        }
        let s = r.stats().unwrap();
        assert_eq!((s.samples, s.min, s.max), (n, 0.0, 999.0));
        assert!((s.p50 - 500.0).abs() < 15.0, "{s:?}");
        assert!((s.p95 - 950.0).abs() < 15.0, "{s:?}");
    }

    #[test]
    fn rates_against_the_link_they_cross() {
        let mut s = GpuSeries::new();
        s.set_facts(GpuDeviceFacts {
            gpu: 0,
            name: Some("NVIDIA H200".into()),
            pcie_gen: Some(4),
            pcie_width: Some(16),
            ..Default::default()
        });
        s.add(&GpuSample {
            gpu: 0,
            pcie_tx_bytes_per_s: Some(15.752e9),
            nvlink_rx_bytes_per_s: Some(225e9),
            ..Default::default()
        });
        s.add(&GpuSample {
            gpu: 0,
            sm_util_percent: Some(40.0),
            ..Default::default()
        });
        let d = &s.summary("test", 1.0, None).devices[0];
        let sm = d
            .vs_peak
            .iter()
            .find(|p| p.quantity == "sm_util_percent mean")
            .unwrap();
        assert_eq!((sm.percent, sm.unit.as_str()), (40.0, "% of time"));
        assert!(sm.peak_source.contains("not of the SMs' throughput"));
        let pcie = d
            .vs_peak
            .iter()
            .find(|p| p.quantity == "pcie_tx_bytes_per_s mean")
            .unwrap();
        // The link trained at gen 4 is what the rate is divided by, not the H200's gen 5.
        assert!((pcie.percent - 50.0).abs() < 1e-6, "{pcie:?}");
        assert_eq!(pcie.peak_source, "the device: PCIe gen 4 x16");
        let nv = d
            .vs_peak
            .iter()
            .find(|p| p.quantity == "nvlink_rx_bytes_per_s max")
            .unwrap();
        assert_eq!(
            (nv.percent, nv.peak_source.as_str()),
            (50.0, "datasheet: H200 NVLink per direction")
        );
    }

    #[test]
    fn one_gpu_has_no_balance_and_nan_is_ignored() {
        let mut s = GpuSeries::new();
        s.add(&sample(0, 0.0, f64::NAN, 5));
        let sum = s.summary("test", 0.0, None);
        assert!(sum.balance.is_none());
        assert!(!sum.devices[0].series.contains_key("sm_util_percent"));
        assert_eq!(sum.rate_hz_achieved, None);
    }
}
