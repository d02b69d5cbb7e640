//! Interconnect metrics: NCCL's debug log (communicators, transports, collectives),
//! `nvidia-smi nvlink`, and nccl-tests' bandwidth tables.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One rank of a communicator, as NCCL's init line gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclRank {
    pub rank: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_dev: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml_dev: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_id: Option<String>,
    /// `host:pid` of the process that printed the line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
}

/// A communicator (one `commId`): its size and the ranks seen initialising it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclCommunicator {
    pub comm_id: String,
    pub nranks: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nnodes: Option<u32>,
    pub ranks: Vec<NcclRank>,
}

/// How data moves between two ranks on how many channels: `P2P/CUMEM/read`,
/// `P2P/direct pointer/read`, `P2P/IPC`, `SHM`, `NET/IB/0`, `NET/Socket/0`, `NET/Libfabric/0`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclTransport {
    pub transport: String,
    /// `P2P`, `SHM`, `NET` or `COLLNET`/`NVLS`: the family of `transport`.
    pub kind: String,
    /// Distinct (from rank, to rank) pairs using it.
    pub pairs: u64,
    /// Channel connections using it (one per line NCCL printed).
    pub connections: u64,
}

/// One collective over the whole log: calls and bytes, with the sizes it was called with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclCollective {
    /// `AllReduce`, `AllGather`, `ReduceScatter`, `Broadcast`, `Reduce`, `Send`, `Recv`, ...
    pub op: String,
    /// NCCL's datatype name (`float32`, `bfloat16`, ...), or the number when unknown.
    pub datatype: String,
    /// Calls logged (every rank logs its own, so a 2-rank call counts twice).
    pub calls: u64,
    pub total_bytes: u64,
    /// Message size in bytes → calls of that size, smallest first.
    pub sizes: Vec<NcclSizeCount>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclSizeCount {
    pub bytes: u64,
    pub calls: u64,
}

/// The algorithm and protocol NCCL chose for one op at one size (COLL/TUNING lines).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclAlgorithmChoice {
    pub op: String,
    pub bytes: u64,
    pub algorithm: String,
    pub protocol: String,
}

/// What an `NCCL_DEBUG=INFO` log says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclReport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `Using network ...`: IB, Socket, Libfabric (AWS EFA), ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<String>,
    pub communicators: Vec<NcclCommunicator>,
    /// By connections, most first.
    pub transports: Vec<NcclTransport>,
    /// Ring channels and tree lines printed at init.
    pub ring_channels: u64,
    pub tree_lines: u64,
    /// Present when the COLL subsystem was logged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<NcclCollective>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub algorithm_choices: Vec<NcclAlgorithmChoice>,
    /// Distinct NCCL WARN messages (the plugin failing, a fallback to sockets, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One NVLink of a GPU, as `nvidia-smi nvlink` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NvLinkLink {
    pub link: u32,
    /// `<inactive>` links are listed with `active: false`.
    pub active: bool,
    /// Per direction, GB/s (`-s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_gbps: Option<f64>,
    /// Cumulative counters (`-gt d`, `-gt r`), KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_tx_kib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_rx_kib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_tx_kib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_rx_kib: Option<u64>,
    /// `-c`: each capability (`P2P is supported`, ...) and whether it holds.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub capabilities: std::collections::BTreeMap<String, bool>,
}

/// One GPU's links.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NvLinkGpu {
    pub gpu: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    pub links: Vec<NvLinkLink>,
    pub active_links: u32,
    /// Sum of the active links' speeds, per direction, GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_speed_gbps: Option<f64>,
}

/// `nvidia-smi nvlink` output: every GPU's links, their speeds, counters or capabilities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NvLinkReport {
    pub gpus: Vec<NvLinkGpu>,
}

/// One message size of an nccl-tests run (`all_reduce_perf`, ...), out of place and in place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclTestsRow {
    pub size_bytes: u64,
    pub count: u64,
    pub datatype: String,
    pub redop: String,
    pub out_of_place_time_us: f64,
    pub out_of_place_algbw_gbps: f64,
    pub out_of_place_busbw_gbps: f64,
    pub in_place_time_us: f64,
    pub in_place_algbw_gbps: f64,
    pub in_place_busbw_gbps: f64,
    /// `#wrong` (newer) or `error` (older): 0 / a small float when the results check out.
    pub out_of_place_wrong: String,
    pub in_place_wrong: String,
}

/// An nccl-tests run's table and summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclTestsReport {
    /// Ranks listed under `# Using devices`, and the GPU model they name.
    pub ranks: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    pub rows: Vec<NcclTestsRow>,
    /// `# Avg bus bandwidth`, GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_busbw_gbps: Option<f64>,
    /// The largest bus bandwidth of any row (out of place), GB/s, and the size it came at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_busbw_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_busbw_size_bytes: Option<u64>,
    /// `# Out of bounds values : 0 OK` said OK.
    pub out_of_bounds_ok: bool,
}
