//! `nvidia-smi nvlink -s` (status: `Link N: 26.562 GB/s` or `<inactive>`), `-gt d` / `-gt r`
//! (throughput counters: `Link N: Data Tx: 1390774681 KiB`) and `-c` (capabilities: `Link N,
//! P2P is supported: true`), under `GPU i: NAME (UUID: ...)` headings; tabs or spaces.

use crate::Format;
use system_profile_model::metrics::{NvLinkGpu, NvLinkLink, NvLinkReport};
use system_profile_model::{Diag, Parsed};

pub struct NvidiaSmiNvlink;

impl Format for NvidiaSmiNvlink {
    const NAME: &'static str = "nvidia_smi_nvlink";
    type Output = NvLinkReport;
    fn parse(input: &str) -> Parsed<NvLinkReport> {
        parse(input)
    }
}

fn link_of(gpu: &mut NvLinkGpu, link: u32) -> &mut NvLinkLink {
    if let Some(i) = gpu.links.iter().position(|l| l.link == link) {
        return &mut gpu.links[i];
    }
    gpu.links.push(NvLinkLink {
        link,
        active: true,
        ..Default::default()
    });
    gpu.links.last_mut().expect("just pushed")
}

pub fn parse(input: &str) -> Parsed<NvLinkReport> {
    let input = crate::strip_ansi(input);
    let mut diagnostics = Vec::new();
    let mut report = NvLinkReport::default();
    for (i, raw) in input.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("GPU ") {
            // GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
            let Some((index, tail)) = rest.split_once(':') else {
                diagnostics.push(Diag::at(i + 1, format!("a GPU line without `:`: {line:?}")));
                continue;
            };
            let (name, uuid) = match tail.rsplit_once("(UUID:") {
                Some((n, u)) => (
                    n.trim(),
                    Some(u.trim().trim_end_matches(')').trim().to_string()),
                ),
                None => (tail.trim(), None),
            };
            report.gpus.push(NvLinkGpu {
                gpu: index.trim().parse().unwrap_or(report.gpus.len() as u32),
                name: name.to_string(),
                uuid,
                ..Default::default()
            });
            continue;
        }
        let Some(rest) = line.strip_prefix("Link ") else {
            diagnostics.push(Diag::at(i + 1, format!("not a GPU or link line: {line:?}")));
            continue;
        };
        let Some(gpu) = report.gpus.last_mut() else {
            diagnostics.push(Diag::at(i + 1, "a link line before any GPU line"));
            continue;
        };
        // `Link 0, P2P is supported: true` or `Link 0: ...`
        let (number, body, capability) = match (rest.find(','), rest.find(':')) {
            (Some(c), Some(k)) if c < k => (&rest[..c], rest[c + 1..].trim(), true),
            (_, Some(k)) => (&rest[..k], rest[k + 1..].trim(), false),
            _ => {
                diagnostics.push(Diag::at(
                    i + 1,
                    format!("a link line without a value: {line:?}"),
                ));
                continue;
            }
        };
        let Ok(number) = number.trim().parse::<u32>() else {
            diagnostics.push(Diag::at(
                i + 1,
                format!("a link without a number: {line:?}"),
            ));
            continue;
        };
        let link = link_of(gpu, number);
        if capability {
            if let Some((what, value)) = body.rsplit_once(':') {
                link.capabilities
                    .insert(what.trim().to_string(), value.trim() == "true");
            }
            continue;
        }
        if body.contains("inactive") {
            link.active = false;
        } else if let Some(speed) = body.strip_suffix("GB/s") {
            link.speed_gbps = speed.trim().parse().ok();
        } else if let Some((kind, value)) = body.split_once(':') {
            let kib = value
                .trim()
                .trim_end_matches("KiB")
                .trim()
                .parse::<u64>()
                .ok();
            match kind.trim() {
                "Data Tx" => link.data_tx_kib = kib,
                "Data Rx" => link.data_rx_kib = kib,
                "Raw Tx" => link.raw_tx_kib = kib,
                "Raw Rx" => link.raw_rx_kib = kib,
                other => diagnostics.push(Diag::at(i + 1, format!("unknown counter {other:?}"))),
            }
        } else {
            diagnostics.push(Diag::at(i + 1, format!("unreadable link value: {line:?}")));
        }
    }
    for g in &mut report.gpus {
        g.active_links = g.links.iter().filter(|l| l.active).count() as u32;
        let speeds: Vec<f64> = g
            .links
            .iter()
            .filter(|l| l.active)
            .filter_map(|l| l.speed_gbps)
            .collect();
        g.total_speed_gbps = (!speeds.is_empty()).then(|| speeds.iter().sum());
    }
    if report.gpus.is_empty() {
        diagnostics.push(Diag::general(
            "no `GPU i:` line: not nvidia-smi nvlink output",
        ));
    }
    Parsed {
        value: report,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inactive_links_and_unknown_lines() {
        let p = parse(
            "GPU 1: NVIDIA A10 (UUID: GPU-x)\n\t Link 0: <inactive>\n\t Link 1: 25 GB/s\nweird\n",
        );
        let g = &p.value.gpus[0];
        assert_eq!(
            (g.gpu, g.active_links, g.total_speed_gbps),
            (1, 1, Some(25.0))
        );
        assert!(!g.links[0].active);
        assert_eq!(p.diagnostics.len(), 1);
    }
}
