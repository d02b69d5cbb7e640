//! `nvidia-smi --query-gpu=... --format=csv` and `--query-compute-apps=... --format=csv`: a
//! header of field names (units in brackets, `memory.used [MiB]`), then one row per GPU (per
//! process) per interval, cells separated by `, `, with `[N/A]`, `[Not Supported]` and other
//! bracketed words for values the device does not give.
//!
//! Fields read into `GpuSample` and their units: `utilization.gpu`, `utilization.memory` (%),
//! `memory.used`, `memory.total` (MiB), `power.draw` or `power.draw.instant` (W), `clocks.sm`
//! or `clocks.current.sm`, `clocks.mem` or `clocks.current.memory` (MHz), `temperature.gpu`
//! (°C); `timestamp` (`YYYY/MM/DD HH:MM:SS.mmm`) gives seconds since the first row; `index`,
//! `name`, `uuid`, `pci.bus_id` the device facts. Compute-apps rows give `pid`,
//! `process_name`, `used_gpu_memory` (MiB) and the GPU by `gpu_uuid` or `gpu_bus_id`.

use crate::Format;
use std::collections::HashMap;
use system_profile_model::metrics::{GpuDeviceFacts, GpuProcessReading, GpuReadings, GpuSample};
use system_profile_model::{Diag, Parsed};

pub struct NvidiaSmiQuery;

impl Format for NvidiaSmiQuery {
    const NAME: &'static str = "nvidia_smi_query";
    type Output = GpuReadings;
    fn parse(input: &str) -> Parsed<GpuReadings> {
        let mut readings = GpuReadings::default();
        let diagnostics = add(&mut readings, input);
        Parsed {
            value: readings,
            diagnostics,
        }
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// Field name without its unit: `memory.used [MiB]` → `memory.used`.
fn field_name(header_cell: &str) -> String {
    header_cell
        .split('[')
        .next()
        .unwrap_or("")
        .trim()
        .to_lowercase()
}

/// A cell's number, its unit word dropped (`45 %`, `1234 MiB`, `69.03 W`); `None` for the
/// bracketed "no value" words.
fn number(cell: &str) -> Option<f64> {
    let cell = cell.trim();
    if cell.starts_with('[') {
        return None;
    }
    cell.split_whitespace().next()?.parse().ok()
}

/// `2026/07/03 22:11:09.763` as seconds since 1970 (UTC assumed: only differences are used).
fn timestamp_s(cell: &str) -> Option<f64> {
    let (date, time) = cell.trim().split_once(' ')?;
    let mut d = date.split('/').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':');
    let (h, min, s) = (
        t.next()?.parse::<f64>().ok()?,
        t.next()?.parse::<f64>().ok()?,
        t.next()?.parse::<f64>().ok()?,
    );
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + h * 3600.0 + min * 60.0 + s)
}

/// Read one CSV output (query-gpu or query-compute-apps) into `readings`; call it again with
/// the other to join processes to devices. Returns what could not be read.
pub fn add(readings: &mut GpuReadings, input: &str) -> Vec<Diag> {
    let mut diagnostics = Vec::new();
    let mut lines = input
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        diagnostics.push(Diag::general("empty output"));
        return diagnostics;
    };
    let fields: Vec<String> = header.split(',').map(field_name).collect();
    let at = |name: &str| fields.iter().position(|f| f == name);
    let is_apps = at("pid").is_some();
    if !is_apps && at("index").is_none() && at("uuid").is_none() {
        diagnostics.push(Diag::at(
            1,
            "no index, uuid or pid field: add `index` to --query-gpu so rows can be told apart",
        ));
    }
    let mut t0: Option<f64> = None;
    let mut order: HashMap<String, u32> = HashMap::new();
    for (i, line) in lines {
        let cells: Vec<&str> = line.split(", ").collect();
        if cells.len() != fields.len() {
            diagnostics.push(Diag::at(
                i + 1,
                format!(
                    "{} cells where the header has {} fields",
                    cells.len(),
                    fields.len()
                ),
            ));
            continue;
        }
        let text = |name: &str| {
            at(name)
                .map(|k| cells[k].trim())
                .filter(|v| !v.is_empty() && !v.starts_with('['))
                .map(str::to_string)
        };
        let num = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| at(n).and_then(|k| number(cells[k])))
        };
        if is_apps {
            let Some(pid) = num(&["pid"]).map(|p| p as u32) else {
                diagnostics.push(Diag::at(i + 1, "a process row without a pid"));
                continue;
            };
            let uuid = text("gpu_uuid");
            let bus = text("gpu_bus_id");
            let gpu = readings
                .devices
                .iter()
                .find(|d| {
                    (uuid.is_some() && d.uuid == uuid) || (bus.is_some() && d.pci_bus_id == bus)
                })
                .map(|d| d.gpu);
            readings.processes.push(GpuProcessReading {
                gpu,
                gpu_uuid: uuid,
                pid,
                name: text("process_name"),
                used_memory_bytes: num(&["used_gpu_memory", "used_memory"])
                    .map(|m| (m * MIB) as u64),
            });
            continue;
        }
        let uuid = text("uuid");
        let next = order.len() as u32;
        let gpu = match num(&["index"]) {
            Some(i) => i as u32,
            None => *order
                .entry(uuid.clone().unwrap_or_default())
                .or_insert(next),
        };
        if !readings.devices.iter().any(|d| d.gpu == gpu) {
            readings.devices.push(GpuDeviceFacts {
                gpu,
                name: text("name"),
                uuid,
                pci_bus_id: text("pci.bus_id"),
                mem_total_bytes: num(&["memory.total"]).map(|m| (m * MIB) as u64),
                pcie_gen: num(&["pcie.link.gen.gpucurrent", "pcie.link.gen.current"])
                    .map(|g| g as u32),
                pcie_width: num(&["pcie.link.width.current"]).map(|w| w as u32),
            });
        }
        let t_s = match text("timestamp").as_deref().and_then(timestamp_s) {
            Some(t) => t - *t0.get_or_insert(t),
            None => 0.0,
        };
        readings.samples.push(GpuSample {
            t_s,
            gpu,
            sm_util_percent: num(&["utilization.gpu"]),
            mem_util_percent: num(&["utilization.memory"]),
            mem_used_bytes: num(&["memory.used"]).map(|m| (m * MIB) as u64),
            mem_total_bytes: num(&["memory.total"]).map(|m| (m * MIB) as u64),
            pcie_tx_bytes_per_s: None,
            pcie_rx_bytes_per_s: None,
            nvlink_tx_bytes_per_s: None,
            nvlink_rx_bytes_per_s: None,
            power_w: num(&["power.draw", "power.draw.instant"]),
            sm_clock_mhz: num(&["clocks.sm", "clocks.current.sm"]),
            mem_clock_mhz: num(&["clocks.mem", "clocks.current.memory"]),
            temperature_c: num(&["temperature.gpu"]),
        });
    }
    // Processes read before the devices they sit on: join them now.
    for p in readings.processes.iter_mut().filter(|p| p.gpu.is_none()) {
        p.gpu = readings
            .devices
            .iter()
            .find(|d| p.gpu_uuid.is_some() && d.uuid == p.gpu_uuid)
            .map(|d| d.gpu);
    }
    diagnostics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_units_and_times() {
        assert_eq!(number("45 %"), Some(45.0));
        assert_eq!(number(" 69.03 W"), Some(69.03));
        assert_eq!(number("[N/A]"), None);
        assert_eq!(
            number("[Requested functionality has been deprecated]"),
            None
        );
        assert_eq!(field_name(" memory.used [MiB]"), "memory.used");
        let a = timestamp_s("2026/07/03 23:59:59.500").unwrap();
        let b = timestamp_s("2026/07/04 00:00:01.000").unwrap();
        assert!((b - a - 1.5).abs() < 1e-6);
        assert_eq!(timestamp_s("2026/07/03"), None);
    }

    #[test]
    fn processes_join_their_gpu_by_uuid_whichever_comes_first() {
        let gpus = "index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n\
                    0, GPU-a, 10 %, 100 MiB, 1000 MiB\n1, GPU-b, 90 %, 900 MiB, 1000 MiB\n";
        let apps =
            "pid, process_name, gpu_uuid, used_gpu_memory [MiB]\n7, python, GPU-b, 800 MiB\n";
        let mut r = GpuReadings::default();
        assert!(add(&mut r, apps).is_empty());
        assert!(add(&mut r, gpus).is_empty());
        assert_eq!(r.processes[0].gpu, Some(1));
        assert_eq!(r.processes[0].used_memory_bytes, Some(800 * 1024 * 1024));
        assert_eq!(r.samples[1].sm_util_percent, Some(90.0));
        assert_eq!(r.devices[1].mem_total_bytes, Some(1000 * 1024 * 1024));
        let bad = add(&mut GpuReadings::default(), "name, power.draw [W]\nx\n");
        assert_eq!(bad.len(), 2, "{bad:?}");
    }
}
