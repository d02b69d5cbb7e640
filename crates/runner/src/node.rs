//! The node part of `cluster_nodes`: what `system-profile node` does on each node of a cluster
//! job, where the job's engine placed it. It finds the job's processes on this node (by the
//! job id in their environment, its own step left out), observes them for a window (the /proc
//! sampler over each process tree, py-spy from outside each rank), and answers the gatherer's
//! clock readings, over one line-based exchange on stdin/stdout:
//!
//! ```text
//! node → "ready"                    gatherer → "clock"   node → "clock <unix ns>"   (repeated)
//! gatherer → "observe"              node → "result <NodeObservation JSON>"
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use system_profile_exec::{CommandSpec, RunOptions};
use system_profile_model::metrics::cluster::{FunctionShare, NodeObservation, RankObservation};
use system_profile_model::metrics::ProcfsSummary;
use system_profile_sample::sampler::{Sampler, SamplerConfig};

/// Whose processes to observe on this node.
#[derive(Debug, Clone)]
pub enum NodeTarget {
    /// A Slurm job's: `SLURM_JOB_ID` in their environment.
    SlurmJob(String),
    /// These processes, each with its rank among all the job's (on every node) and what the
    /// engine calls it (a Ray actor's class and id).
    Pids(Vec<(u32, u32, String)>),
}

/// What to observe on this node.
#[derive(Debug, Clone)]
pub struct NodeRequest {
    pub target: NodeTarget,
    pub window: Duration,
    pub rate_hz: f64,
    /// Where this node's files go (py-spy's stacks).
    pub out_dir: PathBuf,
}

/// Added to every clock reading a node gives, `<ns>` or `<node>=<ns>` (that node only): a
/// test's stand-in for a node whose clock is off (the "nodes" of a one-machine cluster share
/// one clock), which the gatherer must measure and remove.
pub const CLOCK_SKEW_VAR: &str = "SYSTEM_PROFILE_CLOCK_SKEW_NS";

/// The node's name as its gatherer knows it (Ray's nodes have no name of their own).
pub const NODE_VAR: &str = "SYSTEM_PROFILE_NODE";

/// The node this runs on as the engine names it (`SYSTEM_PROFILE_NODE`, which a gatherer
/// sets, or Slurm's `SLURMD_NODENAME`), else the host name.
pub fn node_name() -> String {
    std::env::var(NODE_VAR)
        .or_else(|_| std::env::var("SLURMD_NODENAME"))
        .unwrap_or_else(|_| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default()
        })
}

/// This node's clock, Unix ns (with the test skew).
pub fn clock_ns() -> i128 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let skew: i128 = std::env::var(CLOCK_SKEW_VAR)
        .ok()
        .and_then(|v| match v.split_once('=') {
            Some((node, ns)) if node == node_name() => ns.trim().parse().ok(),
            Some(_) => Some(0),
            None => v.trim().parse().ok(),
        })
        .unwrap_or(0);
    now + skew
}

/// Frames of collective communication or of waiting for it.
fn is_comm_frame(function: &str, file: Option<&str>) -> bool {
    const CALLS: [&str; 11] = [
        "all_reduce",
        "allreduce",
        "barrier",
        "broadcast",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
        "send",
        "recv",
        "wait",
        "_wait",
    ];
    file.is_some_and(|f| f.contains("torch/distributed/")) || CALLS.contains(&function)
}

/// py-spy's raw (folded) stacks of one rank: samples, the share in communication, and its
/// hottest functions by own samples.
pub fn read_stacks(folded: &str) -> (u64, Option<f64>, Vec<FunctionShare>) {
    let mut total = 0u64;
    let mut comm = 0u64;
    let mut own: HashMap<String, u64> = HashMap::new();
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(count) = count.trim().parse::<u64>() else {
            continue;
        };
        let frames: Vec<(&str, Option<&str>, Option<u32>)> = stack
            .split(';')
            .map(system_profile_parse::folded::split_frame)
            .collect();
        total += count;
        if frames.iter().any(|(f, file, _)| is_comm_frame(f, *file)) {
            comm += count;
        }
        if let Some((function, file, line)) = frames.last() {
            let name = match (file, line) {
                (Some(file), Some(line)) => format!("{function} ({file}:{line})"),
                (Some(file), None) => format!("{function} ({file})"),
                _ => function.to_string(),
            };
            *own.entry(name).or_default() += count;
        }
    }
    let mut top: Vec<(String, u64)> = own.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let share = |n: u64| n as f64 / total.max(1) as f64 * 100.0;
    let top = top
        .into_iter()
        .take(3)
        .map(|(function, n)| FunctionShare {
            function,
            percent: share(n),
        })
        .collect();
    (total, (total > 0).then(|| share(comm)), top)
}

/// The job's processes here, as roots of their trees: every process whose environment says
/// `SLURM_JOB_ID=<job>` (and `SLURM_STEP_ID=<step>` when `selector` names a step) and, where
/// Slurm names nodes, this node (several nodes may share a host), but this observer's own
/// step and its tree.
fn job_roots(selector: &str) -> Vec<u32> {
    let (job, step) = system_profile_cluster::job_and_step(selector);
    let own_step = std::env::var("SLURM_STEP_ID").ok();
    let own_node = std::env::var("SLURMD_NODENAME").ok();
    let me = std::process::id();
    let table = system_profile_sample::proc::list_processes();
    let own = system_profile_sample::proc::tree(&table, me);
    let in_job: Vec<u32> = table
        .iter()
        .filter(|p| !own.contains(&p.pid) && p.state != 'Z')
        .filter(|p| {
            let env = system_profile_sample::proc::environ(p.pid);
            let step_id = env.get("SLURM_STEP_ID").map(String::as_str);
            env.get("SLURM_JOB_ID").map(String::as_str) == Some(job)
                // The batch script's processes carry no step id.
                && match step {
                    None => true,
                    Some("batch") => step_id.is_none(),
                    Some(named) => step_id == Some(named),
                }
                && (own_step.is_none() || env.get("SLURM_STEP_ID") != own_step.as_ref())
                && (own_node.is_none() || env.get("SLURMD_NODENAME") == own_node.as_ref())
        })
        .map(|p| p.pid)
        .collect();
    table
        .iter()
        .filter(|p| in_job.contains(&p.pid) && !in_job.contains(&p.ppid))
        .map(|p| p.pid)
        .collect()
}

/// Observe the job's processes on this node for the window.
pub async fn observe(request: &NodeRequest) -> NodeObservation {
    let mut obs = NodeObservation {
        node: node_name(),
        window_start_unix_s: Some(clock_ns() as f64 / 1e9),
        ..Default::default()
    };
    let (roots, labels): (Vec<u32>, BTreeMap<u32, String>) = match &request.target {
        NodeTarget::SlurmJob(job) => (job_roots(job), BTreeMap::new()),
        NodeTarget::Pids(pids) => (
            pids.iter()
                .map(|(pid, _, _)| *pid)
                .filter(|pid| system_profile_sample::proc::exists(*pid))
                .collect(),
            pids.iter()
                .map(|(pid, _, label)| (*pid, label.clone()))
                .collect(),
        ),
    };
    if roots.is_empty() {
        obs.error = Some(match &request.target {
            NodeTarget::SlurmJob(job) => {
                format!("no process of job {job} runs on this node (its steps may have ended)")
            }
            NodeTarget::Pids(pids) => format!(
                "none of the {} processes named runs any more on this node",
                pids.len()
            ),
        });
        return obs;
    }
    let config = SamplerConfig {
        rate_hz: request.rate_hz,
        ..Default::default()
    };
    let _ = std::fs::create_dir_all(&request.out_dir);
    // The node's GPUs, where NVML is there: no GPU is no reading, not an error.
    let gpus = system_profile_sample::nvml::NvmlSampler::start(
        system_profile_sample::nvml::NvmlSamplerConfig {
            rate_hz: request.rate_hz.min(10.0),
            jsonl: Some(request.out_dir.join("nvml.jsonl")),
            ..Default::default()
        },
    )
    .ok();
    let samplers: Vec<Sampler> = roots
        .iter()
        .map(|root| Sampler::start(*root, config.clone()))
        .collect();
    // The ranks are known from their environment now; py-spy follows each one for the window.
    let table = system_profile_sample::proc::list_processes();
    let mut ranks: BTreeMap<u32, (u32, Option<u32>)> = BTreeMap::new();
    if let NodeTarget::Pids(pids) = &request.target {
        // The engine's own processes (actors), with the ranks given.
        for (pid, rank, _) in pids {
            if roots.contains(pid) {
                ranks.insert(*rank, (*pid, None));
            }
        }
    }
    let by_environment = ranks.is_empty();
    for root in roots.iter().filter(|_| by_environment) {
        for pid in system_profile_sample::proc::tree(&table, *root) {
            let env = system_profile_sample::proc::environ(pid);
            if let Some(r) = system_profile_parse::launcher::rank_of(pid, None, &env) {
                let rank = r.ids.rank.unwrap_or(0);
                // A rank's own children (data loader workers) inherit RANK: the first is it.
                ranks.entry(rank).or_insert((pid, r.ids.local_rank));
            }
        }
    }
    let _ = std::fs::create_dir_all(&request.out_dir);
    let py_spy = system_profile_exec::which("py-spy");
    let mut sampled = Vec::new();
    for (rank, (pid, _)) in &ranks {
        let Some(py_spy) = &py_spy else { break };
        let out = request.out_dir.join(format!("rank{rank}.folded"));
        let spec = CommandSpec::new([
            py_spy.to_string_lossy().into_owned(),
            "record".into(),
            "--pid".into(),
            pid.to_string(),
            "--duration".into(),
            format!("{}", request.window.as_secs().max(1)),
            "--rate".into(),
            format!("{}", request.rate_hz.round().max(1.0)),
            "--format".into(),
            "raw".into(),
            "--full-filenames".into(),
            "-o".into(),
            out.to_string_lossy().into_owned(),
        ]);
        sampled.push((*rank, out, spec));
    }
    let timeout = RunOptions::with_timeout(request.window + Duration::from_secs(60));
    let runs = sampled
        .iter()
        .map(|(_, _, spec)| system_profile_exec::run(spec, &timeout));
    let outcomes = futures::future::join_all(runs).await;
    if sampled.is_empty() {
        tokio::time::sleep(request.window).await;
    }
    if py_spy.is_none() && !ranks.is_empty() {
        obs.warnings
            .push("py-spy is not on this node's PATH: no functions per rank".into());
    }
    for ((rank, _, _), outcome) in sampled.iter().zip(&outcomes) {
        if let Err(e) = outcome {
            obs.warnings.push(format!("py-spy on rank {rank}: {e}"));
        }
    }
    let summaries: Vec<ProcfsSummary> = samplers.into_iter().map(Sampler::stop).collect();
    obs.gpu = gpus.map(|g| g.stop());
    let usage: HashMap<u32, &system_profile_model::metrics::ProcessUsage> = summaries
        .iter()
        .flat_map(|s| s.processes.iter().map(|p| (p.pid, p)))
        .collect();
    obs.processes = usage.len() as u32;
    obs.cpu_s = summaries.iter().map(|s| s.cpu_user_s + s.cpu_sys_s).sum();
    obs.rss_peak_bytes = summaries.iter().map(|s| s.rss_peak_bytes).sum();
    for (rank, (pid, local_rank)) in ranks {
        let folded = sampled
            .iter()
            .find(|(r, _, _)| *r == rank)
            .and_then(|(_, out, _)| std::fs::read_to_string(out).ok())
            .unwrap_or_default();
        let (samples, comm_percent, top_functions) = read_stacks(&folded);
        let u = usage.get(&pid);
        obs.ranks.push(RankObservation {
            rank,
            local_rank,
            label: labels.get(&pid).cloned(),
            pid,
            cpu_s: u.map_or(0.0, |u| u.cpu_user_s + u.cpu_sys_s),
            run_queue_s: u.and_then(|u| u.run_queue_s),
            main_thread_blocked_s: u.and_then(|u| u.main_thread_blocked_s),
            rss_peak_bytes: u.map_or(0, |u| u.rss_peak_bytes),
            samples,
            comm_percent,
            top_functions,
        });
    }
    obs
}

/// The exchange with the gatherer: answer clock readings until asked to observe, then observe
/// and give the result. Ends when the gatherer closes its side.
pub async fn serve<R, W>(request: &NodeRequest, input: R, mut output: W) -> std::io::Result<()>
where
    R: tokio::io::AsyncBufRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    output.write_all(b"ready\n").await?;
    output.flush().await?;
    let mut lines = input.lines();
    while let Some(line) = lines.next_line().await? {
        match line.trim() {
            "clock" => {
                output
                    .write_all(format!("clock {}\n", clock_ns()).as_bytes())
                    .await?
            }
            "observe" => {
                let obs = observe(request).await;
                let json = serde_json::to_string(&obs).map_err(std::io::Error::other)?;
                output
                    .write_all(format!("result {json}\n").as_bytes())
                    .await?;
                output.flush().await?;
                return Ok(());
            }
            other => {
                output
                    .write_all(format!("error unknown request `{other}`\n").as_bytes())
                    .await?
            }
        }
        output.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_give_samples_comm_share_and_hot_functions() {
        let folded = "\
main (train.py:40);step (train.py:20);forward (model.py:10) 60
main (train.py:40);step (train.py:22);all_reduce (/x/torch/distributed/distributed_c10d.py:2000) 30
main (train.py:40);load (train.py:30) 10
";
        let (samples, comm, top) = read_stacks(folded);
        assert_eq!(samples, 100);
        assert_eq!(comm, Some(30.0));
        assert_eq!(top[0].function, "forward (model.py:10)");
        assert_eq!(top[0].percent, 60.0);
        assert_eq!(read_stacks("").1, None);
    }

    #[tokio::test]
    async fn the_exchange_answers_clocks_then_gives_a_result() {
        let request = NodeRequest {
            target: NodeTarget::SlurmJob("no-such-job-4242".into()),
            window: Duration::from_millis(10),
            rate_hz: 10.0,
            out_dir: std::env::temp_dir().join("sp-node-test"),
        };
        let input = tokio::io::BufReader::new(&b"clock\nclock\nobserve\n"[..]);
        let mut out = Vec::new();
        serve(&request, input, &mut out).await.unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ready");
        assert!(lines[1].starts_with("clock ") && lines[2].starts_with("clock "));
        let obs: NodeObservation =
            serde_json::from_str(lines[3].strip_prefix("result ").unwrap()).unwrap();
        assert!(obs
            .error
            .as_deref()
            .is_some_and(|e| e.contains("no process of job")));
    }
}
