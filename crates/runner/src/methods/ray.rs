//! `cluster_nodes` on a Ray cluster: `py/ray_nodes.py`, run by the interpreter Ray's own CLI
//! runs with, reads the cluster with Ray's state API and places the node part on every node
//! that runs the job's actors (one NodePart actor each, pinned with
//! NodeAffinitySchedulingStrategy, the binary shipped in its runtime environment). Each node's
//! clock is read over Ray calls, timed here.

use crate::*;
use system_profile_model::metrics::cluster::NodeObservation;

pub(crate) const RAY_NODES: &str = include_str!("py/ray_nodes.py");

/// The interpreter Ray's CLI runs with: the one that imports `ray`.
fn ray_python() -> Option<String> {
    let cli = system_profile_exec::which("ray")?;
    let head = std::fs::read_to_string(cli).ok()?;
    let first = head.lines().next()?.strip_prefix("#!")?.trim();
    Some(first.split_whitespace().next()?.to_string())
}

#[derive(serde::Deserialize)]
struct NodeLine {
    node: String,
    #[serde(default)]
    readings: Vec<(f64, i128, f64)>,
    #[serde(default)]
    observation: Option<NodeObservation>,
    #[serde(default)]
    error: Option<String>,
}

pub(crate) async fn ray_nodes(
    job: &str,
    program: &Path,
    window: Duration,
    rate_hz: f64,
    nodes_dir: &Path,
    e: &mut Execution,
) -> Result<Vec<NodeObservation>, RunError> {
    let python = ray_python().ok_or_else(|| {
        RunError::new(
            RunErrorKind::BadTarget,
            "Ray's CLI (`ray`) is not on PATH: run the server where the Ray cluster's Python is (pip install \"ray[default]\")",
        )
    })?;
    let request = serde_json::json!({
        "job": job,
        "binary": program,
        "window_s": window.as_secs_f64(),
        "rate_hz": rate_hz,
        "out_dir": nodes_dir,
        "readings": 7,
    })
    .to_string();
    e.argv = vec![
        python.clone(),
        "-c".into(),
        "<ray_nodes.py>".into(),
        request.clone(),
    ];
    let spec = CommandSpec::new([python.as_str(), "-c", RAY_NODES, request.as_str()]);
    let out = system_profile_exec::run(
        &spec,
        &RunOptions::with_timeout(window + Duration::from_secs(600)),
    )
    .await
    .map_err(|err| RunError::new(RunErrorKind::Io, format!("{python} did not start: {err}")))?;
    let mut nodes = Vec::new();
    for line in out.stdout.text().lines().filter(|l| l.starts_with('{')) {
        let Ok(n) = serde_json::from_str::<NodeLine>(line) else {
            e.warnings
                .push(format!("unreadable line from the Ray driver: {line}"));
            continue;
        };
        let mut obs = n.observation.unwrap_or_default();
        obs.node = n.node;
        obs.error = obs.error.or(n.error);
        let readings: Vec<(f64, f64, f64)> = n
            .readings
            .iter()
            .map(|(sent, theirs, received)| (*sent, *theirs as f64 / 1e9, *received))
            .collect();
        if let Some((offset, uncertainty)) = super::cluster::offset_of(&readings) {
            obs.clock_offset_s = Some(offset);
            obs.clock_uncertainty_s = Some(uncertainty);
            obs.window_start_unix_s = obs.window_start_unix_s.map(|t| t - offset);
        }
        nodes.push(obs);
    }
    if nodes.is_empty() {
        return Err(RunError::new(
            RunErrorKind::Io,
            format!(
                "the Ray driver gave no node ({:?}): {}",
                out.exit,
                out.stderr
                    .text()
                    .lines()
                    .last()
                    .unwrap_or("no message")
                    .trim()
            ),
        ));
    }
    Ok(nodes)
}
