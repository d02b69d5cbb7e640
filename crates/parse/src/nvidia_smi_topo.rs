//! `nvidia-smi topo -m` (also `--matrix`): the device matrix, CPU/NUMA affinity columns and the
//! NIC legend. Handles space- and tab-separated layouts, ANSI underlines from a tty, NIC rows
//! named `NIC#` or by device (`mlx5_0`), and outputs without the `GPU NUMA ID` column.

use crate::{strip_ansi, Format};
use system_profile_model::topology::{
    GpuTopology, LinkKind, PciePair, TopoDevice, TopoDeviceKind, TopoLink, TopologySource,
};
use system_profile_model::{Diag, Parsed};

pub struct NvidiaSmiTopo;

impl Format for NvidiaSmiTopo {
    const NAME: &'static str = "nvidia_smi_topo";
    type Output = GpuTopology;
    fn parse(input: &str) -> Parsed<GpuTopology> {
        parse(input)
    }
}

/// Trailing columns that are not devices, in the order nvidia-smi prints them.
const AFFINITY_COLUMNS: [&str; 3] = ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"];

/// Parse one cell code (`X`, `NV12`, `PIX`, ...).
pub fn link_from_code(code: &str) -> TopoLink {
    let (kind, nvlink_count) = match code {
        "X" => (LinkKind::SelfLink, None),
        "PIX" => (LinkKind::Pix, None),
        "PXB" => (LinkKind::Pxb, None),
        "PHB" => (LinkKind::Phb, None),
        "NODE" => (LinkKind::Node, None),
        "SYS" | "SOC" => (LinkKind::Sys, None),
        _ => match code.strip_prefix("NV").map(str::parse::<u32>) {
            Some(Ok(n)) => (LinkKind::Nvlink, Some(n)),
            _ => (LinkKind::Unknown, None),
        },
    };
    TopoLink {
        code: code.to_string(),
        kind,
        nvlink_count,
    }
}

fn device_kind(label: &str) -> TopoDeviceKind {
    if label.starts_with("GPU") {
        TopoDeviceKind::Gpu
    } else {
        TopoDeviceKind::Nic
    }
}

/// Split a header into labels, keeping the multi-word affinity titles whole.
fn header_labels(line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut labels = Vec::new();
    let mut i = 0;
    'outer: while i < words.len() {
        for title in AFFINITY_COLUMNS {
            let parts: Vec<&str> = title.split(' ').collect();
            if words[i..].starts_with(&parts) {
                labels.push(title.to_string());
                i += parts.len();
                continue 'outer;
            }
        }
        labels.push(words[i].to_string());
        i += 1;
    }
    labels
}

pub fn parse(input: &str) -> Parsed<GpuTopology> {
    let text = strip_ansi(input);
    let mut diagnostics = Vec::new();
    let mut topo = GpuTopology {
        source: Some(TopologySource::NvidiaSmiTopo),
        ..Default::default()
    };

    let lines: Vec<&str> = text.lines().collect();
    let Some(header_idx) = lines
        .iter()
        .position(|l| l.split_whitespace().next().is_some_and(|w| w == "GPU0"))
    else {
        diagnostics.push(Diag::general(
            "no header line starting with GPU0: not nvidia-smi topo -m output",
        ));
        return Parsed {
            value: topo,
            diagnostics,
        };
    };
    let labels = header_labels(lines[header_idx]);
    let device_cols: Vec<String> = labels
        .iter()
        .take_while(|l| !AFFINITY_COLUMNS.contains(&l.as_str()))
        .cloned()
        .collect();
    let affinity_cols: Vec<&str> = labels[device_cols.len()..]
        .iter()
        .map(String::as_str)
        .collect();
    let n = device_cols.len();
    topo.devices = device_cols
        .iter()
        .map(|label| TopoDevice {
            label: label.clone(),
            kind: device_kind(label),
            name: None,
            cpu_affinity: None,
            numa_affinity: None,
            gpu_numa_id: None,
        })
        .collect();
    topo.links = vec![Vec::new(); n];

    let mut in_nic_legend = false;
    for (offset, line) in lines[header_idx + 1..].iter().enumerate() {
        let lineno = header_idx + 2 + offset;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with("NIC Legend") {
            in_nic_legend = true;
            continue;
        }
        if trimmed.starts_with("Legend") {
            continue;
        }
        if in_nic_legend {
            if let Some((label, name)) = trimmed.split_once(':') {
                if let Some(dev) = topo.devices.iter_mut().find(|d| d.label == label.trim()) {
                    dev.name = Some(name.trim().to_string());
                }
            }
            continue;
        }
        // Legend lines look like "X    = Self".
        if trimmed.contains(" = ") || trimmed.contains("= ") {
            continue;
        }
        let words: Vec<&str> = trimmed.split_whitespace().collect();
        let Some(row) = device_cols.iter().position(|c| c == words[0]) else {
            diagnostics.push(Diag::at(
                lineno,
                format!("row label '{}' is not a column of the header", words[0]),
            ));
            continue;
        };
        let cells = &words[1..];
        if cells.len() < n {
            diagnostics.push(Diag::at(
                lineno,
                format!(
                    "row {} has {} cells for {} devices; missing cells read as unknown",
                    words[0],
                    cells.len(),
                    n
                ),
            ));
        }
        let mut links: Vec<TopoLink> = cells.iter().take(n).map(|c| link_from_code(c)).collect();
        while links.len() < n {
            links.push(link_from_code("?"));
        }
        for link in &links {
            if link.kind == LinkKind::Unknown && link.code != "?" {
                diagnostics.push(Diag::at(
                    lineno,
                    format!("unknown link code '{}'", link.code),
                ));
            }
        }
        if !topo.links[row].is_empty() {
            diagnostics.push(Diag::at(
                lineno,
                format!("row {} appears twice; the later one is kept", words[0]),
            ));
        }
        topo.links[row] = links;
        let rest = cells.get(n..).unwrap_or(&[]);
        let dev = &mut topo.devices[row];
        for (col, value) in affinity_cols.iter().zip(rest.iter()) {
            let value = Some(value.to_string());
            match *col {
                "CPU Affinity" => dev.cpu_affinity = value,
                "NUMA Affinity" => dev.numa_affinity = value,
                _ => dev.gpu_numa_id = value,
            }
        }
    }

    // Rows never printed (a cut-off capture) stay as unknown cells so the matrix is square.
    for (i, row) in topo.links.iter_mut().enumerate() {
        if row.is_empty() {
            diagnostics.push(Diag::general(format!(
                "no row for {}; its cells read as unknown",
                device_cols[i]
            )));
            *row = (0..n).map(|_| link_from_code("?")).collect();
        }
    }

    let gpus: Vec<usize> = (0..n)
        .filter(|&i| topo.devices[i].kind == TopoDeviceKind::Gpu)
        .collect();
    for (x, &i) in gpus.iter().enumerate() {
        for &j in &gpus[x + 1..] {
            let link = &topo.links[i][j];
            if link.kind == LinkKind::Nvlink {
                topo.nvlink_gpu_pairs += 1;
            } else if link.kind.is_pcie() {
                topo.pcie_gpu_pairs.push(PciePair {
                    a: device_cols[i].clone(),
                    b: device_cols[j].clone(),
                    link: link.kind,
                });
            }
        }
    }

    Parsed {
        value: topo,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_gives_a_diagnostic_not_a_panic() {
        let p = parse("hello\nworld");
        assert!(p.value.devices.is_empty());
        assert_eq!(p.diagnostics.len(), 1);
    }

    #[test]
    fn truncated_row_is_padded() {
        let p = parse("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\nGPU1\tNV4");
        assert_eq!(p.value.links[1].len(), 2);
        assert_eq!(p.value.links[1][1].kind, LinkKind::Unknown);
        assert_eq!(p.value.nvlink_gpu_pairs, 1);
        assert!(!p.diagnostics.is_empty());
    }

    #[test]
    fn empty_input() {
        let p = parse("");
        assert!(p.value.links.is_empty());
    }
}
