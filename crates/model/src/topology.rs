//! GPU-to-GPU (and GPU-to-NIC) topology, as `nvidia-smi topo -m` prints it or NVML reports it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a topology came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TopologySource {
    Nvml,
    NvidiaSmiTopo,
}

/// What connects two devices, from fastest to slowest path.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// The device itself (`X`).
    #[serde(rename = "self")]
    SelfLink,
    /// A bonded set of NVLinks (`NV#`).
    Nvlink,
    /// At most one PCIe bridge (`PIX`).
    Pix,
    /// Several PCIe bridges, no host bridge (`PXB`).
    Pxb,
    /// PCIe and a host bridge, typically the CPU (`PHB`).
    Phb,
    /// PCIe and the interconnect between host bridges in one NUMA node (`NODE`).
    Node,
    /// PCIe and the SMP interconnect between NUMA nodes (`SYS`).
    Sys,
    /// A code this parser does not know; `code` keeps it.
    Unknown,
}

impl LinkKind {
    /// True for the paths that go over PCIe (everything but NVLink and self).
    pub fn is_pcie(self) -> bool {
        matches!(
            self,
            LinkKind::Pix | LinkKind::Pxb | LinkKind::Phb | LinkKind::Node | LinkKind::Sys
        )
    }
}

/// One cell of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TopoLink {
    /// The code as printed: `X`, `NV18`, `PIX`, `SYS`, ...
    pub code: String,
    pub kind: LinkKind,
    /// Number of bonded NVLinks for `NV#`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_count: Option<u32>,
}

/// What a row or column of the matrix is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TopoDeviceKind {
    Gpu,
    Nic,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TopoDevice {
    /// The label as printed (`GPU0`, `NIC3`, `mlx5_0`).
    pub label: String,
    pub kind: TopoDeviceKind,
    /// The device name from the NIC legend (`mlx5_ib0`), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// CPUs close to this GPU (`0-47,96-143`), as printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_affinity: Option<String>,
    /// NUMA node(s) close to this GPU, as printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_affinity: Option<String>,
    /// The GPU's own NUMA id (set on Grace-Hopper and similar), as printed; `N/A` elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_numa_id: Option<String>,
}

/// A pair of GPUs that talk over PCIe rather than NVLink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PciePair {
    pub a: String,
    pub b: String,
    pub link: LinkKind,
}

/// The device matrix. `links[i][j]` connects `devices[i]` and `devices[j]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct GpuTopology {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<TopologySource>,
    pub devices: Vec<TopoDevice>,
    pub links: Vec<Vec<TopoLink>>,
    /// GPU pairs without an NVLink between them, with the PCIe path they take.
    pub pcie_gpu_pairs: Vec<PciePair>,
    /// GPU pairs joined by NVLink.
    pub nvlink_gpu_pairs: usize,
}
