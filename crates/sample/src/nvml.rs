//! NVML, loaded once per process (a missing library is a reason, not an error), and the NVML
//! sampler: a thread that reads every GPU at a fixed rate (default 10 Hz) and writes one
//! `GpuSample` per GPU per tick to JSONL, summarised by `gpu::GpuSeries`.
//!
//! What each tick reads, per device, and its unit:
//! - `nvmlDeviceGetUtilizationRates`: kernel-busy and memory-controller-busy shares of the
//!   driver's last sample period, percent;
//! - `nvmlDeviceGetMemoryInfo`: used and total framebuffer, bytes;
//! - `nvmlDeviceGetPowerUsage`: milliwatts (stored as watts);
//! - `nvmlDeviceGetClockInfo` (SM, memory): MHz; `nvmlDeviceGetTemperature` (GPU): °C;
//! - `nvmlDeviceGetFieldValues` NVLINK_THROUGHPUT_DATA_TX/RX with scope "all links":
//!   cumulative KiB, turned into bytes per second between ticks with NVML's own timestamps;
//! - once a second, `nvmlDeviceGetPcieThroughput` TX/RX (KB/s over the device's last 20 ms:
//!   it is a short window, so it is read at 1 Hz rather than on every tick) and
//!   `nvmlDeviceGetComputeRunningProcesses` (per process used memory, bytes).
//!
//! A quantity the device does not support is asked once and then left out.

use crate::background::{pace, Background};
use crate::gpu::GpuSeries;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use system_profile_model::metrics::{GpuDeviceFacts, GpuSample, GpuSummary};

/// NVML, initialised on first use and kept for the life of the process; the error says why
/// it cannot be had and what to do.
pub fn nvml() -> Result<&'static Nvml, &'static str> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| {
        Nvml::init().map_err(|e| {
            format!("NVML could not be loaded ({e}): no NVIDIA driver on this machine, or libnvidia-ml.so.1 is not visible (in a container, run with --gpus all)")
        })
    })
    .as_ref()
    .map_err(String::as_str)
}

/// Why the NVML sampler cannot run here.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct NvmlUnavailable {
    pub reason: String,
}

/// How to sample.
#[derive(Debug, Clone)]
pub struct NvmlSamplerConfig {
    /// Ticks per second (default 10; NVML's utilisation counters are themselves averages
    /// over 1/6 s to 1 s, so faster says little more).
    pub rate_hz: f64,
    /// Device indices to read; empty means all.
    pub devices: Vec<u32>,
    /// One JSON line per GPU per tick; `None` keeps only the summary.
    pub jsonl: Option<PathBuf>,
    /// Counts ticks as they are taken, for progress reports.
    pub samples_taken: Option<Arc<AtomicU64>>,
}

impl Default for NvmlSamplerConfig {
    fn default() -> Self {
        NvmlSamplerConfig {
            rate_hz: 10.0,
            devices: Vec::new(),
            jsonl: None,
            samples_taken: None,
        }
    }
}

/// A running NVML sampler; `stop` ends it and returns the summary.
pub struct NvmlSampler(Background<GpuSummary>);

impl NvmlSampler {
    /// Start reading the GPUs now; an error when NVML or a GPU is missing.
    pub fn start(config: NvmlSamplerConfig) -> Result<NvmlSampler, NvmlUnavailable> {
        let nvml = nvml().map_err(|r| NvmlUnavailable { reason: r.into() })?;
        let count = nvml.device_count().map_err(|e| NvmlUnavailable {
            reason: format!("NVML loaded but could not count the GPUs: {e}"),
        })?;
        let wanted: Vec<u32> = if config.devices.is_empty() {
            (0..count).collect()
        } else {
            config.devices.clone()
        };
        if let Some(bad) = wanted.iter().find(|i| **i >= count) {
            return Err(NvmlUnavailable {
                reason: format!("GPU {bad} does not exist: NVML sees {count} GPU(s)"),
            });
        }
        if wanted.is_empty() {
            return Err(NvmlUnavailable {
                reason: "NVML loaded but reports no GPU".into(),
            });
        }
        Background::spawn("nvml-sampler".into(), move |stop| {
            sample_loop(nvml, &wanted, &config, stop)
        })
        .map(NvmlSampler)
        .map_err(|e| NvmlUnavailable {
            reason: format!("could not start the sampler thread: {e}"),
        })
    }

    /// Stop after the current tick and return the summary.
    pub fn stop(self) -> GpuSummary {
        self.0.stop()
    }
}

/// One device and what is remembered of it between ticks.
struct Reader<'n> {
    index: u32,
    device: Device<'n>,
    unsupported: Vec<&'static str>,
    /// Last NVLink (NVML timestamp µs, TX KiB, RX KiB).
    nvlink_last: Option<(i64, u64, u64)>,
    /// Last PCIe reading, repeated on the ticks in between so every line has the latest.
    pcie_last: (Option<f64>, Option<f64>),
}

impl Reader<'_> {
    /// The value, or `None` (remembering `NotSupported` so it is not asked again).
    fn ask<T>(
        &mut self,
        what: &'static str,
        f: impl FnOnce(&Device) -> Result<T, NvmlError>,
    ) -> Option<T> {
        if self.unsupported.contains(&what) {
            return None;
        }
        match f(&self.device) {
            Ok(v) => Some(v),
            Err(NvmlError::NotSupported) | Err(NvmlError::FunctionNotFound) => {
                self.unsupported.push(what);
                None
            }
            Err(_) => None,
        }
    }

    /// NVLink data TX and RX over all links, cumulative KiB, with NVML's timestamp (µs).
    fn nvlink_counters(&mut self, nvml: &Nvml) -> Option<(i64, u64, u64)> {
        if self.unsupported.contains(&"nvlink") {
            return None;
        }
        let lib = nvml.lib();
        // SAFETY: the handle belongs to `self.device`, alive for this call; the array has the
        // length passed and NVML only writes into it.
        let (ret, values) = unsafe {
            let mut values: [nvml_wrapper_sys::bindings::nvmlFieldValue_t; 2] = std::mem::zeroed();
            values[0].fieldId =
                nvml_wrapper_sys::bindings::field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
            values[1].fieldId =
                nvml_wrapper_sys::bindings::field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
            // UINT_MAX: the sum over every link.
            values[0].scopeId = u32::MAX;
            values[1].scopeId = u32::MAX;
            let ret = lib.nvmlDeviceGetFieldValues(self.device.handle(), 2, values.as_mut_ptr());
            (ret, values)
        };
        let ok = |v: &nvml_wrapper_sys::bindings::nvmlFieldValue_t| {
            v.nvmlReturn == nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_SUCCESS
        };
        if ret != nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_SUCCESS
            || !ok(&values[0])
            || !ok(&values[1])
        {
            self.unsupported.push("nvlink");
            return None;
        }
        // SAFETY: NVML reports these two fields as unsigned long long.
        let (tx, rx) = unsafe { (values[0].value.ullVal, values[1].value.ullVal) };
        Some((values[0].timestamp, tx, rx))
    }
}

fn sample_loop(
    nvml: &'static Nvml,
    wanted: &[u32],
    config: &NvmlSamplerConfig,
    stop: &AtomicBool,
) -> GpuSummary {
    let started = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / config.rate_hz.clamp(0.1, 1000.0));
    let once_a_second = (config.rate_hz.round() as u64).max(1);
    let mut series = GpuSeries::new();
    let mut readers: Vec<Reader> = Vec::new();
    for &index in wanted {
        let Ok(device) = nvml.device_by_index(index) else {
            continue;
        };
        series.set_facts(GpuDeviceFacts {
            gpu: index,
            name: device.name().ok(),
            uuid: device.uuid().ok(),
            pci_bus_id: device.pci_info().ok().map(|p| p.bus_id),
            mem_total_bytes: device.memory_info().ok().map(|m| m.total),
            pcie_gen: device.current_pcie_link_gen().ok(),
            pcie_width: device.current_pcie_link_width().ok(),
        });
        readers.push(Reader {
            index,
            device,
            unsupported: Vec::new(),
            nvlink_last: None,
            pcie_last: (None, None),
        });
    }
    let mut out = config
        .jsonl
        .as_ref()
        .and_then(|p| File::create(p).ok())
        .map(BufWriter::new);
    let mut ticks: u64 = 0;
    let mut next = started;
    loop {
        let t_s = started.elapsed().as_secs_f64();
        let slow_tick = ticks % once_a_second == 0;
        for r in readers.iter_mut() {
            let util = r.ask("utilization", |d| d.utilization_rates());
            let mem = r.ask("memory", |d| d.memory_info());
            if slow_tick {
                r.pcie_last = (
                    r.ask("pcie_tx", |d| d.pcie_throughput(PcieUtilCounter::Send))
                        .map(|kb| f64::from(kb) * 1024.0),
                    r.ask("pcie_rx", |d| d.pcie_throughput(PcieUtilCounter::Receive))
                        .map(|kb| f64::from(kb) * 1024.0),
                );
                if let Some(procs) = r.ask("processes", |d| d.running_compute_processes()) {
                    for p in procs {
                        let used = match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => b,
                            UsedGpuMemory::Unavailable => 0,
                        };
                        let name = crate::proc::read_process(p.pid).map(|s| s.comm);
                        series.add_process(r.index, p.pid, name, used);
                    }
                }
            }
            let (nvlink_tx, nvlink_rx) = match r.nvlink_counters(nvml) {
                Some(now) => {
                    let rate = r.nvlink_last.and_then(|(t0, tx0, rx0)| {
                        let dt_s = (now.0 - t0) as f64 / 1e6;
                        (dt_s > 0.0).then(|| {
                            (
                                now.1.saturating_sub(tx0) as f64 * 1024.0 / dt_s,
                                now.2.saturating_sub(rx0) as f64 * 1024.0 / dt_s,
                            )
                        })
                    });
                    r.nvlink_last = Some(now);
                    (rate.map(|x| x.0), rate.map(|x| x.1))
                }
                None => (None, None),
            };
            let sample = GpuSample {
                t_s,
                gpu: r.index,
                sm_util_percent: util.as_ref().map(|u| f64::from(u.gpu)),
                mem_util_percent: util.as_ref().map(|u| f64::from(u.memory)),
                mem_used_bytes: mem.as_ref().map(|m| m.used),
                mem_total_bytes: mem.as_ref().map(|m| m.total),
                pcie_tx_bytes_per_s: r.pcie_last.0,
                pcie_rx_bytes_per_s: r.pcie_last.1,
                nvlink_tx_bytes_per_s: nvlink_tx,
                nvlink_rx_bytes_per_s: nvlink_rx,
                power_w: r
                    .ask("power", |d| d.power_usage())
                    .map(|mw| f64::from(mw) / 1000.0),
                sm_clock_mhz: r
                    .ask("sm_clock", |d| d.clock_info(Clock::SM))
                    .map(f64::from),
                mem_clock_mhz: r
                    .ask("mem_clock", |d| d.clock_info(Clock::Memory))
                    .map(f64::from),
                temperature_c: r
                    .ask("temperature", |d| d.temperature(TemperatureSensor::Gpu))
                    .map(f64::from),
            };
            series.add(&sample);
            if let Some(w) = out.as_mut() {
                let line = serde_json::to_string(&sample).unwrap_or_default();
                if writeln!(w, "{line}").is_err() {
                    out = None;
                }
            }
        }
        ticks += 1;
        if let Some(c) = &config.samples_taken {
            c.store(ticks, Ordering::Relaxed);
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        pace(&mut next, interval);
    }
    if let Some(mut w) = out {
        let _ = w.flush();
    }
    let mut summary = series.summary(
        "nvml",
        started.elapsed().as_secs_f64(),
        Some(config.rate_hz),
    );
    summary.sampler_cpu_s = Some(crate::sampler::own_cpu_s());
    summary
}
