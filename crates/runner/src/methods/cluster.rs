//! `cluster_nodes`: our node part (`system-profile node`, the same binary, copied by Slurm)
//! placed on every node of a running job by the job's engine (`srun --jobid --overlap`),
//! each node's clock measured against ours over the same exchange, the observations gathered
//! into `nodes.json` and the ranks compared across nodes.

use crate::*;
use system_profile_model::metrics::cluster::{ClusterProfile, NodeObservation, RankObservation};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Clock exchanges per node; the one with the shortest round trip is kept.
const CLOCK_READINGS: usize = 7;
/// How long srun may take to start the node part and the node part to answer, beyond the
/// window.
const START_GRACE: Duration = Duration::from_secs(120);

pub(crate) async fn cluster_nodes(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let started = Instant::now();
    let program = std::env::current_exe().map_err(|e| {
        RunError::new(
            RunErrorKind::Io,
            format!("this program's own path is unknown: {e}"),
        )
    })?;
    let window = window(input);
    let rate_hz = input.options.rate_hz.unwrap_or(20.0);
    let nodes_dir = place.dir.join("nodes");
    let mut e = super::nvidia::machine_execution(Vec::new(), 0.0);
    let (engine, job_id, nodes) = match &input.target {
        RunTarget::SlurmJob { slurm_job } => {
            let nodes =
                slurm_nodes(slurm_job, &program, window, rate_hz, &nodes_dir, &mut e).await?;
            ("slurm", slurm_job.clone(), nodes)
        }
        RunTarget::RayJob { ray_job } => {
            let nodes = super::ray::ray_nodes(ray_job, &program, window, rate_hz, &nodes_dir, &mut e)
                .await?;
            let job = if ray_job.is_empty() { "cluster" } else { ray_job };
            ("ray", job.to_string(), nodes)
        }
        _ => {
            return Err(RunError::new(
                RunErrorKind::BadTarget,
                "cluster_nodes reaches a cluster job: give target {\"slurm_job\": \"<id>\"} or {\"ray_job\": \"<id>\"} (\"\" for every actor of the Ray cluster)",
            ))
        }
    };
    for obs in &nodes {
        if let Some(err) = &obs.error {
            e.warnings.push(format!("node {}: {err}", obs.node));
        }
    }
    let ranks: Vec<&RankObservation> = nodes.iter().flat_map(|n| n.ranks.iter()).collect();
    let (stragglers, compute_imbalance) = stragglers(&ranks, window.as_secs_f64());
    let profile = ClusterProfile {
        engine: engine.to_string(),
        job_id: job_id.clone(),
        window_s: window.as_secs_f64(),
        nodes,
        stragglers,
        compute_imbalance,
    };
    let json = artifact_path(input, place, ArtifactKind::NodesJson);
    if let Ok(text) = serde_json::to_string_pretty(&profile) {
        if let Err(err) = std::fs::write(&json, text) {
            e.warnings.push(format!("nodes.json not written: {err}"));
        }
    }
    e.artifacts
        .extend(file_artifact(json, ArtifactKind::NodesJson));
    if profile.nodes.is_empty() || profile.nodes.iter().all(|n| n.error.is_some()) {
        e.status = RunStatus::Failed;
        e.error = Some(format!(
            "no node of {engine} job {job_id} could be observed: {}",
            e.warnings.join("; ")
        ));
    }
    e.metrics.nodes = Some(profile);
    e.wall_s = started.elapsed().as_secs_f64();
    Ok(e)
}

/// A running Slurm job's nodes, each observed through srun.
async fn slurm_nodes(
    slurm_job: &str,
    program: &Path,
    window: Duration,
    rate_hz: f64,
    nodes_dir: &Path,
    e: &mut Execution,
) -> Result<Vec<NodeObservation>, RunError> {
    let (job_id, step) = system_profile_cluster::job_and_step(slurm_job);
    let job = system_profile_cluster::slurm_job(job_id)
        .await
        .map_err(|err| {
            let kind = match err.kind {
                system_profile_cluster::ClusterErrorKind::NoEngine => {
                    RunErrorKind::ToolUnavailable
                }
                _ => RunErrorKind::BadTarget,
            };
            RunError::new(kind, err.message)
        })?;
    if job.state != "RUNNING" || job.nodes.is_empty() {
        return Err(RunError::new(
            RunErrorKind::BadTarget,
            format!(
                "Slurm job {slurm_job} is {} (nodes: {}): only a running job's processes can be observed; wait until it runs",
                job.state,
                job.node_list.as_deref().unwrap_or("none yet")
            ),
        ));
    }
    // A step named: the nodes it runs on, and only its processes there.
    let nodes = match step {
        None => job.nodes.clone(),
        Some(step) => {
            let full = format!("{job_id}.{step}");
            match job.steps.iter().find(|s| s.step_id == full) {
                Some(running) => system_profile_cluster::slurm_hostnames(&running.node_list)
                    .await
                    .map_err(|err| RunError::new(RunErrorKind::BadTarget, err.message))?,
                // A controller that lists no step: every node of the job, the step's
                // processes selected there (identify leaves the step unchecked too).
                None if job.steps.is_empty() => job.nodes.clone(),
                None => {
                    return Err(RunError::new(
                        RunErrorKind::BadTarget,
                        format!(
                            "Slurm job {job_id} has no running step {full} (its steps: {}): name one of them, or the job",
                            job.steps_phrase()
                        ),
                    ))
                }
            }
        }
    };
    let gathered = futures::future::join_all(nodes.iter().map(|node| {
        gather_node(
            slurm_job,
            node,
            program,
            window,
            rate_hz,
            nodes_dir.join(node),
        )
    }))
    .await;
    let mut nodes = Vec::new();
    for (obs, argv) in gathered {
        if e.argv.is_empty() {
            e.argv = argv;
        }
        nodes.push(obs);
    }
    Ok(nodes)
}

/// The offset of a node's clock from the readings `(sent, node's clock, received)` in s: the
/// reading with the shortest round trip, and half that trip as its uncertainty.
pub(crate) fn offset_of(readings: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    readings
        .iter()
        .map(|(sent, theirs, received)| (received - sent, theirs - (sent + received) / 2.0))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(rtt, offset)| (offset, rtt / 2.0))
}

/// One node: srun starts the node part there; its clock is read `CLOCK_READINGS` times, then
/// it observes for the window and answers with what it saw. Never fails: what went wrong is
/// the observation's `error`.
async fn gather_node(
    job: &str,
    node: &str,
    program: &Path,
    window: Duration,
    rate_hz: f64,
    out_dir: PathBuf,
) -> (NodeObservation, Vec<String>) {
    let failed = |why: String| NodeObservation {
        node: node.to_string(),
        error: Some(why),
        ..Default::default()
    };
    let bcast = std::env::temp_dir().join(format!(
        "system-profile-node-{}-{}",
        std::process::id(),
        node
    ));
    let args = vec![
        "node".into(),
        "--slurm-job".into(),
        job.into(),
        "--window-s".into(),
        format!("{}", window.as_secs_f64()),
        "--rate-hz".into(),
        format!("{rate_hz}"),
        "--out".into(),
        out_dir.to_string_lossy().into_owned(),
    ];
    // srun joins the job; the node part is told the step too, to select its processes.
    let (job_id, _) = system_profile_cluster::job_and_step(job);
    let argv = system_profile_cluster::srun_on_node(job_id, node, program, &bcast, &args);
    let exchange = async {
        let mut child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("srun did not start: {e}"))?;
        let mut stdin = child.stdin.take().ok_or("srun gave no stdin")?;
        let stdout = child.stdout.take().ok_or("srun gave no stdout")?;
        let mut stderr = child.stderr.take();
        let mut lines = BufReader::new(stdout).lines();
        let mut next = async || -> Result<String, String> {
            match lines.next_line().await {
                Ok(Some(line)) => Ok(line),
                Ok(None) => {
                    let mut why = String::new();
                    if let Some(err) = stderr.as_mut() {
                        use tokio::io::AsyncReadExt;
                        let _ = err.read_to_string(&mut why).await;
                    }
                    Err(format!(
                        "the node part ended early: {}",
                        why.lines().last().unwrap_or("no message").trim()
                    ))
                }
                Err(e) => Err(format!("reading srun's output: {e}")),
            }
        };
        // srun and slurmstepd may say things first; the node part starts with `ready`.
        while next().await?.trim() != "ready" {}
        let mut readings = Vec::new();
        for _ in 0..CLOCK_READINGS {
            let sent = unix_s();
            stdin
                .write_all(b"clock\n")
                .await
                .map_err(|e| e.to_string())?;
            stdin.flush().await.map_err(|e| e.to_string())?;
            let line = next().await?;
            let received = unix_s();
            let Some(theirs) = line
                .strip_prefix("clock ")
                .and_then(|n| n.trim().parse::<i128>().ok())
            else {
                return Err(format!("the node part answered `{line}` to a clock reading"));
            };
            readings.push((sent, theirs as f64 / 1e9, received));
        }
        stdin
            .write_all(b"observe\n")
            .await
            .map_err(|e| e.to_string())?;
        stdin.flush().await.map_err(|e| e.to_string())?;
        let line = next().await?;
        let json = line
            .strip_prefix("result ")
            .ok_or_else(|| format!("the node part answered `{line}`"))?;
        let mut obs: NodeObservation =
            serde_json::from_str(json).map_err(|e| format!("unreadable observation: {e}"))?;
        drop(stdin);
        let _ = child.wait().await;
        if let Some((offset, uncertainty)) = offset_of(&readings) {
            obs.clock_offset_s = Some(offset);
            obs.clock_uncertainty_s = Some(uncertainty);
            obs.window_start_unix_s = obs.window_start_unix_s.map(|t| t - offset);
        }
        Ok::<_, String>(obs)
    };
    let obs = match tokio::time::timeout(window + START_GRACE, exchange).await {
        Ok(Ok(mut obs)) => {
            // srun's node name, not the host's: what the job lists.
            obs.node = node.to_string();
            obs
        }
        Ok(Err(why)) => failed(why),
        Err(_) => failed(format!(
            "no answer within {:.0} s of the window's end",
            START_GRACE.as_secs_f64()
        )),
    };
    let _ = std::fs::remove_file(&bcast);
    (obs, argv)
}

pub(crate) fn unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The ranks the others waited for, and the largest compute over the smallest. A rank's
/// compute is its CPU time over the window; a straggler computes at least 10% longer than the
/// median of the others while they spend a real share of the window (5%) more off the CPU or
/// in collectives than it does: waiting for it. Off the CPU is the main thread's blocked time
/// where the sampler read it (a rank waits for a collective there); else the window less the
/// rank's CPU and run-queue time, which are sums over threads and on a busy machine can fill
/// the window by themselves (a CI run: 6.2 s CPU and 14.2 s queued in 20 s, so no waiting
/// seen though the rank waited for its straggler). Time on a run queue is not waiting for a
/// rank (the machine was busy), so it is never counted as off the CPU.
pub(crate) fn stragglers(ranks: &[&RankObservation], window_s: f64) -> (Vec<u32>, Option<f64>) {
    if ranks.len() < 2 || window_s <= 0.0 {
        return (Vec::new(), None);
    }
    let median = |mut v: Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) / 2]
    };
    let waiting = |r: &RankObservation| {
        let off_cpu = r.main_thread_blocked_s.unwrap_or_else(|| {
            (window_s - r.cpu_s - r.run_queue_s.unwrap_or(0.0)).max(0.0)
        });
        let in_comm = r.comm_percent.unwrap_or(0.0) / 100.0 * window_s;
        off_cpu.max(in_comm)
    };
    let mut out = Vec::new();
    for r in ranks {
        let others: Vec<&&RankObservation> = ranks.iter().filter(|o| o.rank != r.rank).collect();
        if others.is_empty() {
            continue;
        }
        let others_cpu = median(others.iter().map(|o| o.cpu_s).collect());
        let others_wait = median(others.iter().map(|o| waiting(o)).collect());
        let computes_longer = r.cpu_s > others_cpu * 1.1;
        let waited_for = others_wait - waiting(r) >= 0.05 * window_s;
        if computes_longer && waited_for {
            out.push(r.rank);
        }
    }
    out.sort_unstable();
    let lo = ranks.iter().map(|r| r.cpu_s).fold(f64::INFINITY, f64::min);
    let hi = ranks.iter().map(|r| r.cpu_s).fold(0.0, f64::max);
    (out, (lo > 0.0).then(|| hi / lo))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: u32, cpu_s: f64, comm_percent: f64) -> RankObservation {
        RankObservation {
            rank,
            cpu_s,
            comm_percent: Some(comm_percent),
            ..Default::default()
        }
    }

    #[test]
    fn the_rank_the_others_wait_for_is_the_straggler() {
        let (r0, r1, r2) = (rank(0, 4.0, 50.0), rank(1, 9.5, 5.0), rank(2, 4.2, 48.0));
        let (s, imbalance) = stragglers(&[&r0, &r1, &r2], 10.0);
        assert_eq!(s, vec![1]);
        assert!((imbalance.unwrap() - 9.5 / 4.0).abs() < 1e-9);
        // Even ranks: none.
        let (a, b) = (rank(0, 9.0, 8.0), rank(1, 9.2, 7.0));
        assert!(stragglers(&[&a, &b], 10.0).0.is_empty());
        // One rank: no comparison.
        assert_eq!(stragglers(&[&a], 10.0), (Vec::new(), None));
        // A machine so busy that both spend most of the window on a run queue (a Ray
        // cluster's actors beside CPU hogs): the fast one still waits for the slow one.
        let busy = |rank: u32, cpu_s: f64, run_queue_s: f64| RankObservation {
            rank,
            cpu_s,
            run_queue_s: Some(run_queue_s),
            comm_percent: Some(0.0),
            ..Default::default()
        };
        let (fast, slow) = (busy(0, 0.63, 5.0), busy(1, 0.83, 17.0));
        assert_eq!(stragglers(&[&fast, &slow], 20.0).0, vec![1]);
        // A CI run's torch ranks: CPU and queue summed over threads fill the window of the
        // rank that waited (6.19 + 14.2 s in 20 s), so only its main thread's blocked time
        // shows the wait.
        let threaded = |rank: u32, cpu_s: f64, run_queue_s: f64, blocked: Option<f64>| {
            RankObservation {
                main_thread_blocked_s: blocked,
                ..busy(rank, cpu_s, run_queue_s)
            }
        };
        let (waited, straggler) = (
            threaded(0, 6.19, 14.2, None),
            threaded(1, 11.87, 9.0, None),
        );
        assert!(stragglers(&[&waited, &straggler], 20.0).0.is_empty());
        let (waited, straggler) = (
            threaded(0, 6.19, 14.2, Some(9.5)),
            threaded(1, 11.87, 9.0, Some(1.2)),
        );
        assert_eq!(stragglers(&[&waited, &straggler], 20.0).0, vec![1]);
        // Both blocked alike (even ranks that both wait on I/O): no straggler.
        let (a, b) = (
            threaded(0, 6.0, 3.0, Some(8.0)),
            threaded(1, 6.3, 3.0, Some(7.9)),
        );
        assert!(stragglers(&[&a, &b], 20.0).0.is_empty());
    }
}
