//! GPUs through NVML (loaded once per process by `system_profile_sample::nvml`; a missing
//! library is a reason, not an error),
//! and the GPU-to-GPU topology: NVML's common ancestors and NVLink remote bus ids, else
//! `nvidia-smi topo -m` parsed by `system_profile_parse::nvidia_smi_topo`.

use nvml_wrapper::enum_wrappers::device::TopologyLevel;
use nvml_wrapper::Nvml;
use std::time::Duration;
use system_profile_exec::{run, which, CommandSpec, RunOptions};
use system_profile_model::detect::{GpuEnvironment, GpuInfo, NvLinkStatus};
use system_profile_model::topology::{
    GpuTopology, PciePair, TopoDevice, TopoDeviceKind, TopoLink, TopologySource,
};
use system_profile_parse::nvidia_smi_topo;

/// NVML has at most this many links per device (NVML_NVLINK_MAX_LINKS).
const MAX_NVLINKS: u32 = 18;

/// NVML, loaded once per process (shared with the NVML sampler).
pub use system_profile_sample::nvml::nvml;

pub struct GpuProbe {
    pub env: GpuEnvironment,
    /// nvidia-smi answered a query (driver reachable through it).
    pub nvidia_smi_works: bool,
    pub nvidia_smi_error: Option<String>,
    pub diagnostics: Vec<String>,
}

pub async fn probe(timeout: Duration) -> GpuProbe {
    let nvml_task = tokio::task::spawn_blocking(read_nvml);
    let nvml = match tokio::time::timeout(timeout, nvml_task).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Err(format!("NVML probe panicked: {e}")),
        Err(_) => Err(format!(
            "NVML did not answer within {:.1} s",
            timeout.as_secs_f64()
        )),
    };
    let mut diagnostics = Vec::new();
    let mut env = match nvml {
        Ok(env) => env,
        Err(reason) => crate::linux::hardware::no_gpu(&reason),
    };

    let mut nvidia_smi_works = false;
    let mut nvidia_smi_error = None;
    if let Some(smi) = which("nvidia-smi") {
        let query = CommandSpec::new([
            smi.as_os_str().to_owned(),
            "--query-gpu=driver_version".into(),
            "--format=csv,noheader".into(),
        ]);
        match run(&query, &RunOptions::with_timeout(timeout)).await {
            Ok(o) if o.exit.success() => {
                nvidia_smi_works = true;
                if env.driver_version.is_none() {
                    env.driver_version = o.stdout.text().lines().next().map(|s| s.trim().into());
                }
            }
            Ok(o) => nvidia_smi_error = Some(o.first_line()),
            Err(e) => nvidia_smi_error = Some(e.to_string()),
        }
        if env.topology.is_none() && nvidia_smi_works {
            let topo = CommandSpec::new([smi.as_os_str().to_owned(), "topo".into(), "-m".into()]);
            match run(&topo, &RunOptions::with_timeout(timeout)).await {
                Ok(o) if o.exit.success() => {
                    let parsed = nvidia_smi_topo::parse(&o.stdout.text());
                    diagnostics.extend(
                        parsed
                            .diagnostics
                            .iter()
                            .map(|d| format!("nvidia-smi topo -m: {}", d.message)),
                    );
                    env.topology = Some(parsed.value);
                }
                Ok(o) => diagnostics.push(format!("nvidia-smi topo -m failed: {:?}", o.exit)),
                Err(e) => diagnostics.push(format!("nvidia-smi topo -m: {e}")),
            }
        }
    }
    GpuProbe {
        env,
        nvidia_smi_works,
        nvidia_smi_error,
        diagnostics,
    }
}

/// NVML facts: driver and CUDA driver version; per device name, UUID, PCI bus id, total memory
/// (bytes), PCIe generation and width (current and max), compute capability, NVLink states.
fn read_nvml() -> Result<GpuEnvironment, String> {
    let nvml = nvml().map_err(str::to_string)?;
    let count = nvml
        .device_count()
        .map_err(|e| format!("NVML loaded but could not count devices: {e}"))?;
    let cuda_driver_version = nvml
        .sys_cuda_driver_version()
        .ok()
        .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
    let mut gpus = Vec::new();
    for index in 0..count {
        let Ok(dev) = nvml.device_by_index(index) else {
            continue;
        };
        let nvlinks = (0..MAX_NVLINKS)
            .filter_map(|link| {
                let l = dev.link_wrapper_for(link);
                let active = l.is_active().ok()?;
                Some(NvLinkStatus {
                    link,
                    active,
                    remote_pci_bus_id: if active {
                        l.remote_pci_info().ok().map(|p| p.bus_id)
                    } else {
                        None
                    },
                })
            })
            .collect();
        gpus.push(GpuInfo {
            index,
            name: dev.name().unwrap_or_default(),
            uuid: dev.uuid().unwrap_or_default(),
            pci_bus_id: dev.pci_info().ok().map(|p| p.bus_id),
            memory_total_bytes: dev.memory_info().map(|m| m.total).unwrap_or(0),
            pcie_gen_current: dev.current_pcie_link_gen().ok(),
            pcie_gen_max: dev.max_pcie_link_gen().ok(),
            pcie_width_current: dev.current_pcie_link_width().ok(),
            pcie_width_max: dev.max_pcie_link_width().ok(),
            compute_capability: dev
                .cuda_compute_capability()
                .ok()
                .map(|c| format!("{}.{}", c.major, c.minor)),
            nvlinks,
        });
    }
    let topology = nvml_topology(nvml, &gpus);
    Ok(GpuEnvironment {
        nvml_available: true,
        driver_version: nvml.sys_driver_version().ok(),
        cuda_driver_version,
        reason: if gpus.is_empty() {
            Some("NVML loaded but reports no GPU".into())
        } else {
            None
        },
        gpus,
        topology,
    })
}

/// Build the same matrix `nvidia-smi topo -m` prints: NV# where active NVLinks join two GPUs,
/// else the PCIe common ancestor.
fn nvml_topology(nvml: &Nvml, gpus: &[GpuInfo]) -> Option<GpuTopology> {
    if gpus.is_empty() {
        return None;
    }
    let mut topo = GpuTopology {
        source: Some(TopologySource::Nvml),
        ..Default::default()
    };
    for g in gpus {
        topo.devices.push(TopoDevice {
            label: format!("GPU{}", g.index),
            kind: TopoDeviceKind::Gpu,
            name: Some(g.name.clone()),
            cpu_affinity: None,
            numa_affinity: None,
            gpu_numa_id: None,
        });
    }
    for (i, a) in gpus.iter().enumerate() {
        let mut row = Vec::new();
        for (j, b) in gpus.iter().enumerate() {
            let code = if i == j {
                "X".to_string()
            } else {
                let links = a
                    .nvlinks
                    .iter()
                    .filter(|l| {
                        l.active
                            && l.remote_pci_bus_id.is_some()
                            && l.remote_pci_bus_id == b.pci_bus_id
                    })
                    .count();
                if links > 0 {
                    format!("NV{links}")
                } else {
                    let level = nvml
                        .device_by_index(a.index)
                        .and_then(|da| {
                            let db = nvml.device_by_index(b.index)?;
                            da.topology_common_ancestor(db)
                        })
                        .ok();
                    match level {
                        Some(TopologyLevel::Internal) | Some(TopologyLevel::Single) => "PIX",
                        Some(TopologyLevel::Multiple) => "PXB",
                        Some(TopologyLevel::HostBridge) => "PHB",
                        Some(TopologyLevel::Node) => "NODE",
                        Some(TopologyLevel::System) => "SYS",
                        None => "?",
                    }
                    .to_string()
                }
            };
            row.push(nvidia_smi_topo::link_from_code(&code));
        }
        topo.links.push(row);
    }
    for i in 0..gpus.len() {
        for j in i + 1..gpus.len() {
            let link: &TopoLink = &topo.links[i][j];
            if link.nvlink_count.is_some() {
                topo.nvlink_gpu_pairs += 1;
            } else if link.kind.is_pcie() {
                topo.pcie_gpu_pairs.push(PciePair {
                    a: topo.devices[i].label.clone(),
                    b: topo.devices[j].label.clone(),
                    link: link.kind,
                });
            }
        }
    }
    Some(topo)
}
