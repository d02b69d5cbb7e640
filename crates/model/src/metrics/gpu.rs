//! GPU metrics: one reading of a GPU (NVML or nvidia-smi), their summary per device and
//! across devices, and the processes on each.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One reading of one GPU, from NVML or from an nvidia-smi output. A field is absent when it
/// was not read, the device does not support it, or the tool printed N/A / `-`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuSample {
    /// Seconds since the sampler started (or since the tool's first line).
    pub t_s: f64,
    /// NVML / nvidia-smi device index.
    pub gpu: u32,
    /// Share of the last sample period in which a kernel ran (NVML `utilization.gpu`,
    /// dmon `sm`), percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_util_percent: Option<f64>,
    /// Share of the period the memory controller was busy (NVML `utilization.memory`, dmon
    /// `mem`), percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_util_percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    /// PCIe bytes per second leaving the GPU (to the host or a peer) and arriving at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_tx_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_rx_bytes_per_s: Option<f64>,
    /// NVLink data bytes per second over all links, sent and received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_tx_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_rx_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
}

/// One quantity over a run's samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SeriesStats {
    pub samples: u64,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub min: f64,
    pub max: f64,
}

/// A process holding memory on a GPU, at its largest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuProcessMemory {
    pub pid: u32,
    /// The process's name where known (/proc/<pid>/comm, or what nvidia-smi printed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub used_memory_peak_bytes: u64,
}

/// One GPU over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuDeviceSummary {
    pub gpu: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    /// Each quantity of `GpuSample` that was read at least once, by its field name.
    pub series: std::collections::BTreeMap<String, SeriesStats>,
    /// Processes seen on it, by peak memory, largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<GpuProcessMemory>,
    /// PCIe and NVLink rates against their peaks, each saying which peak.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vs_peak: Vec<crate::peaks::PeakUse>,
}

/// How evenly the work spread over the GPUs (two or more).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuBalance {
    /// Mean SM utilisation of the busiest and the idlest GPU, and the gap between them in
    /// percentage points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_gpu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idlest_gpu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_util_spread_points: Option<f64>,
    /// Largest and smallest peak memory used over the GPUs, and their ratio (1.0 is even).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_used_peak_max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_used_peak_min_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_used_peak_ratio: Option<f64>,
}

/// GPUs over a run: NVML sampler, nvidia-smi dmon or query.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuSummary {
    /// `nvml`, `nvidia-smi dmon` or `nvidia-smi query`.
    pub source: String,
    pub wall_s: f64,
    /// Readings taken (one per GPU per tick).
    pub samples: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_hz_requested: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_hz_achieved: Option<f64>,
    pub devices: Vec<GpuDeviceSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<GpuBalance>,
    /// CPU time the sampler itself used (NVML sampler only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler_cpu_s: Option<f64>,
}

/// What a reading source says of a device besides its numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuDeviceFacts {
    pub gpu: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    /// The PCIe link as the device reports it now (it trains down when idle on some GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
}

/// A process seen on a GPU at one reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuProcessReading {
    /// The device index, when the source gives it or it could be matched by UUID / bus id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_uuid: Option<String>,
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory_bytes: Option<u64>,
}

/// Everything a GPU tool's output said: readings over time, device facts, processes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuReadings {
    pub samples: Vec<GpuSample>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<GpuDeviceFacts>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<GpuProcessReading>,
    /// Columns the output had that no `GpuSample` field holds (dmon `enc`, `dec`, `jpg`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_columns: Vec<String>,
}
