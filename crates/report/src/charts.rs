//! SVG time-series charts from the samplers (plotters' SVG backend, no fonts needed): CPU cores
//! busy and RSS from the /proc sampler; SM utilisation, GPU memory, PCIe and NVLink
//! throughput from NVML or dmon. One file per run and quantity under
//! `profile_output/<session>/charts/`.

use crate::fmt::tr;
use crate::series::{GpuSeries, RunSeries};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use system_profile_model::report::{Chart, Lang};

const WIDTH: u32 = 800;
const HEIGHT: u32 = 300;
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One chart to draw: named lines of (seconds, value).
struct Plot<'a> {
    kind: &'static str,
    title: String,
    y_label: String,
    lines: Vec<(String, &'a [(f64, f64)])>,
    scale: f64,
}

/// Draw into an SVG string.
fn draw(plot: &Plot) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let points = plot.lines.iter().flat_map(|l| l.1.iter());
        let (mut x_max, mut y_max) = (0.0f64, 0.0f64);
        for (x, y) in points {
            x_max = x_max.max(*x);
            y_max = y_max.max(*y / plot.scale);
        }
        let x_max = if x_max > 0.0 { x_max } else { 1.0 };
        let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
        let mut chart = ChartBuilder::on(&root)
            .caption(&plot.title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("s")
            .y_desc(plot.y_label.as_str())
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (name, line)) in plot.lines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let scale = plot.scale;
            chart
                .draw_series(LineSeries::new(
                    line.iter().map(move |(x, y)| (*x, *y / scale)),
                    &color,
                ))
                .map_err(|e| e.to_string())?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        if plot.lines.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

fn gpu_lines(s: &GpuSeries) -> Vec<(String, &[(f64, f64)])> {
    s.iter()
        .map(|(gpu, points)| (format!("cuda:{gpu}"), points.as_slice()))
        .collect()
}

/// Draw every chart the runs' series allow; returns what was written and what failed.
pub fn draw_all(
    root: &Path,
    session_dir: &str,
    lang: Lang,
    series: &BTreeMap<String, RunSeries>,
) -> (Vec<Chart>, Vec<String>) {
    let mut charts = Vec::new();
    let mut notes = Vec::new();
    for (run_id, s) in series {
        let mut plots = Vec::new();
        if let Some(t) = &s.tree {
            if t.cpu_cores.len() >= 2 {
                plots.push(Plot {
                    kind: "cpu",
                    title: tr(
                        lang,
                        format!("{run_id}: CPU cores busy"),
                        format!("{run_id}: CPU 使用コア数"),
                    ),
                    y_label: tr(lang, "cores", "コア"),
                    lines: vec![("cpu".into(), t.cpu_cores.as_slice())],
                    scale: 1.0,
                });
            }
            if t.rss_bytes.len() >= 2 {
                plots.push(Plot {
                    kind: "rss",
                    title: tr(
                        lang,
                        format!("{run_id}: resident memory (tree)"),
                        format!("{run_id}: 常駐メモリ（プロセスツリー）"),
                    ),
                    y_label: "MiB".into(),
                    lines: vec![("rss".into(), t.rss_bytes.as_slice())],
                    scale: 1024.0 * 1024.0,
                });
            }
        }
        if let Some(g) = &s.gpu {
            let wanted: [(&'static str, String, &str, &GpuSeries, f64); 4] = [
                (
                    "gpu_util",
                    tr(
                        lang,
                        format!("{run_id}: SM utilisation"),
                        format!("{run_id}: SM 使用率"),
                    ),
                    "%",
                    &g.sm_util_percent,
                    1.0,
                ),
                (
                    "gpu_memory",
                    tr(
                        lang,
                        format!("{run_id}: GPU memory used"),
                        format!("{run_id}: GPU 使用メモリ"),
                    ),
                    "GiB",
                    &g.mem_used_bytes,
                    1024.0 * 1024.0 * 1024.0,
                ),
                (
                    "pcie",
                    tr(
                        lang,
                        format!("{run_id}: PCIe throughput (tx + rx)"),
                        format!("{run_id}: PCIe スループット（送信 + 受信）"),
                    ),
                    "GB/s",
                    &g.pcie_bytes_per_s,
                    1e9,
                ),
                (
                    "nvlink",
                    tr(
                        lang,
                        format!("{run_id}: NVLink throughput (tx + rx)"),
                        format!("{run_id}: NVLink スループット（送信 + 受信）"),
                    ),
                    "GB/s",
                    &g.nvlink_bytes_per_s,
                    1e9,
                ),
            ];
            for (kind, title, y, data, scale) in wanted {
                if data.values().any(|p| p.len() >= 2) {
                    plots.push(Plot {
                        kind,
                        title,
                        y_label: y.into(),
                        lines: gpu_lines(data),
                        scale,
                    });
                }
            }
        }
        for p in plots {
            let rel = format!("{session_dir}/charts/{run_id}-{}.svg", p.kind);
            let points = p.lines.iter().map(|l| l.1.len() as u64).sum();
            let written = draw(&p).and_then(|svg| {
                crate::write_file(root, &rel, svg.as_bytes()).map_err(|e| e.to_string())
            });
            match written {
                Ok(()) => charts.push(Chart {
                    kind: p.kind.into(),
                    title: p.title,
                    run_id: run_id.clone(),
                    path: rel,
                    points,
                }),
                Err(e) => notes.push(format!("chart {rel} not drawn: {e}")),
            }
        }
    }
    (charts, notes)
}
