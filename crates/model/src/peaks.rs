//! What a GPU can do at most, to divide measured rates by: a table of NVIDIA datacenter GPUs
//! from their public datasheets (memory bandwidth, NVLink bandwidth per direction, PCIe link,
//! SMs, dense BF16 tensor throughput), and PCIe bandwidth by generation and width. Every
//! figure divided by a peak carries that peak and where it came from (`PeakUse`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The datasheet peaks of one GPU model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuModelPeaks {
    /// Matched against the device name NVML / nvidia-smi / Kineto give (longest match wins).
    pub name_contains: &'static str,
    pub memory_bandwidth_gbps: f64,
    /// NVLink bandwidth per direction over all links, GB/s (`None`: no NVLink).
    pub nvlink_gbps_per_direction: Option<f64>,
    pub pcie_gen: u32,
    pub pcie_width: u32,
    pub sm_count: u32,
    pub bf16_dense_tflops: f64,
}

const fn gpu(
    name_contains: &'static str,
    memory_bandwidth_gbps: f64,
    nvlink_gbps_per_direction: Option<f64>,
    pcie_gen: u32,
    sm_count: u32,
    bf16_dense_tflops: f64,
) -> GpuModelPeaks {
    GpuModelPeaks {
        name_contains,
        memory_bandwidth_gbps,
        nvlink_gbps_per_direction,
        pcie_gen,
        pcie_width: 16,
        sm_count,
        bf16_dense_tflops,
    }
}

/// Public datasheet figures (SXM unless the name says PCIe).
pub const GPU_PEAKS: &[GpuModelPeaks] = &[
    gpu("H200", 4800.0, Some(450.0), 5, 132, 989.0),
    gpu("H100 80GB HBM3", 3350.0, Some(450.0), 5, 132, 989.0),
    gpu("H100 PCIe", 2000.0, Some(300.0), 5, 114, 756.0),
    gpu("H100 NVL", 3900.0, Some(300.0), 5, 132, 835.0),
    gpu("H800", 3350.0, Some(200.0), 5, 132, 989.0),
    gpu("A100-SXM4-80GB", 2039.0, Some(300.0), 4, 108, 312.0),
    gpu("A100-SXM4-40GB", 1555.0, Some(300.0), 4, 108, 312.0),
    gpu("A100-PG509-200", 1555.0, Some(300.0), 4, 108, 312.0),
    gpu("A100 80GB PCIe", 1935.0, Some(300.0), 4, 108, 312.0),
    gpu("A100-PCIE-40GB", 1555.0, Some(300.0), 4, 108, 312.0),
    gpu("L40S", 864.0, None, 4, 142, 362.0),
    gpu("L4", 300.0, None, 4, 58, 121.0),
    gpu("A10G", 600.0, None, 4, 80, 70.0),
    gpu("V100-SXM2", 900.0, Some(150.0), 3, 80, 125.0),
    gpu("V100-PCIE", 900.0, None, 3, 80, 112.0),
];

/// The table's entry for a device name, the longest `name_contains` that matches.
pub fn gpu_peaks(name: &str) -> Option<&'static GpuModelPeaks> {
    GPU_PEAKS
        .iter()
        .filter(|p| name.contains(p.name_contains))
        .max_by_key(|p| p.name_contains.len())
}

/// PCIe bandwidth per direction, GB/s: per-lane rate after encoding, times the width.
pub fn pcie_gbps_per_direction(gen: u32, width: u32) -> Option<f64> {
    let per_lane = match gen {
        1 => 0.25,
        2 => 0.5,
        3 => 0.985,
        4 => 1.969,
        5 => 3.938,
        6 => 7.563,
        _ => return None,
    };
    Some(per_lane * f64::from(width))
}

/// A measured rate against a peak, saying which peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PeakUse {
    /// What was measured: `pcie_tx_bytes_per_s mean`, `HtoD copies`, ...
    pub quantity: String,
    pub achieved: f64,
    pub peak: f64,
    /// Unit of `achieved` and `peak` (GB/s).
    pub unit: String,
    pub percent: f64,
    /// Where the peak comes from: `NVML: PCIe gen 5 x16`, `datasheet: H100 80GB HBM3`, ...
    pub peak_source: String,
}

impl PeakUse {
    pub fn new(
        quantity: impl Into<String>,
        achieved: f64,
        peak: f64,
        unit: &str,
        source: impl Into<String>,
    ) -> PeakUse {
        PeakUse {
            quantity: quantity.into(),
            achieved,
            peak,
            unit: unit.into(),
            percent: if peak > 0.0 {
                achieved / peak * 100.0
            } else {
                0.0
            },
            peak_source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_most_specific_entry() {
        assert_eq!(
            gpu_peaks("NVIDIA H100 80GB HBM3")
                .unwrap()
                .memory_bandwidth_gbps,
            3350.0
        );
        assert_eq!(gpu_peaks("NVIDIA H100 PCIe").unwrap().sm_count, 114);
        assert_eq!(
            gpu_peaks("NVIDIA H200").unwrap().memory_bandwidth_gbps,
            4800.0
        );
        assert_eq!(gpu_peaks("NVIDIA L40S").unwrap().name_contains, "L40S");
        assert_eq!(gpu_peaks("NVIDIA L4").unwrap().name_contains, "L4");
        assert!(gpu_peaks("GeForce GTX 1080").is_none());
        assert!((pcie_gbps_per_direction(5, 16).unwrap() - 63.008).abs() < 1e-9);
        assert_eq!(pcie_gbps_per_direction(9, 16), None);
        assert_eq!(PeakUse::new("x", 25.0, 50.0, "GB/s", "t").percent, 50.0);
    }
}
