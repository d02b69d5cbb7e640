//! What a cluster engine says about a job, asked through the engine's own tools: Slurm's
//! `scontrol show job` and `squeue` (parsed by `parse::slurm`), the job's node list expanded by
//! `scontrol show hostnames`, Ray's state API through its CLI (`parse::ray`), and the `srun`
//! line that places one of our processes on one of a Slurm job's nodes beside its steps.
//! Nothing here reaches a node any other way.

use std::path::Path;
use std::time::Duration;
use system_profile_exec::{CommandSpec, RunOptions};
use system_profile_model::target::ClusterJob;

/// How long Slurm's client commands may take (a busy controller answers slowly).
const ASK_TIMEOUT: Duration = Duration::from_secs(20);

/// Why the engine gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ClusterError {
    pub kind: ClusterErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterErrorKind {
    /// The engine's tools are not on PATH.
    NoEngine,
    /// The engine answered that there is no such job.
    NoSuchJob,
    /// The tool ran and failed otherwise (controller down, timeout).
    Failed,
}

fn error(kind: ClusterErrorKind, message: impl Into<String>) -> ClusterError {
    ClusterError {
        kind,
        message: message.into(),
    }
}

async fn ask(argv: &[&str]) -> Result<String, ClusterError> {
    if system_profile_exec::which(argv[0]).is_none() {
        return Err(error(
            ClusterErrorKind::NoEngine,
            format!(
                "{} is not on PATH: this machine is not a Slurm client",
                argv[0]
            ),
        ));
    }
    let out = system_profile_exec::run(
        &CommandSpec::new(argv.iter().copied()),
        &RunOptions::with_timeout(ASK_TIMEOUT),
    )
    .await
    .map_err(|e| error(ClusterErrorKind::Failed, format!("{} failed: {e}", argv[0])))?;
    if out.exit.success() {
        Ok(out.stdout.text())
    } else {
        let why = out.stderr.text().trim().to_string();
        let kind = if why.contains("Invalid job id") {
            ClusterErrorKind::NoSuchJob
        } else {
            ClusterErrorKind::Failed
        };
        Err(error(kind, format!("`{}`: {why}", argv.join(" "))))
    }
}

/// A Slurm job by id, with its nodes one by one and its running steps.
pub async fn slurm_job(job_id: &str) -> Result<ClusterJob, ClusterError> {
    let text = ask(&["scontrol", "show", "job", "-o", job_id]).await?;
    let parsed = system_profile_parse::slurm::parse_job(&text);
    let mut job = parsed.value.ok_or_else(|| {
        error(
            ClusterErrorKind::NoSuchJob,
            format!("Slurm knows no job {job_id}"),
        )
    })?;
    if let Some(list) = job.node_list.clone() {
        job.nodes = slurm_hostnames(&list).await?;
    }
    // Its steps are context, not a condition: a controller that will not list them leaves
    // the job as it is.
    if let Ok(text) = ask(&[
        "squeue",
        "-h",
        "--steps",
        "-j",
        &job.job_id,
        "-o",
        "%i|%j|%N|%A",
    ])
    .await
    {
        job.steps = system_profile_parse::slurm::parse_steps(&text).value;
    }
    Ok(job)
}

/// A Slurm node list (`gpu[01-04]`) one name each, as `scontrol show hostnames` expands it.
pub async fn slurm_hostnames(list: &str) -> Result<Vec<String>, ClusterError> {
    Ok(ask(&["scontrol", "show", "hostnames", list])
        .await?
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// A Slurm job or step as the user wrote it (`1234`, `1234.0`, `1234.batch`): the job's id
/// and the step's part.
pub fn job_and_step(selector: &str) -> (&str, Option<&str>) {
    match selector.split_once('.') {
        Some((job, step)) if !step.is_empty() => (job, Some(step)),
        _ => (selector.trim_end_matches('.'), None),
    }
}

/// The jobs `squeue` lists (all users'), as rows.
pub async fn slurm_queue() -> Result<Vec<system_profile_parse::slurm::QueueRow>, ClusterError> {
    let text = ask(&["squeue", "-h", "-o", "%i|%j|%u|%T|%N"]).await?;
    Ok(system_profile_parse::slurm::parse_queue(&text).value)
}

/// The live actors of Ray job `job` (every job's when empty) on the Ray cluster this machine
/// belongs to, and their nodes, from Ray's state API (its CLI finds the cluster as `ray`
/// does: `RAY_ADDRESS`, else the one started here).
pub async fn ray_job(job: &str) -> Result<ClusterJob, ClusterError> {
    let nodes = ask(&[
        "ray", "list", "nodes", "--format", "json", "--limit", "10000",
    ])
    .await?;
    let actors = ask(&[
        "ray",
        "list",
        "actors",
        "--format",
        "json",
        "--filter",
        "state=ALIVE",
        "--limit",
        "10000",
    ])
    .await?;
    system_profile_parse::ray::cluster_job(&nodes, &actors, job)
        .value
        .ok_or_else(|| error(ClusterErrorKind::Failed, "Ray listed no node"))
}

/// The `srun` argv that starts `program args` once on `node`, inside job `job_id` beside its
/// running steps (`--overlap`), unbuffered (the exchange is line by line), with `program`
/// copied there first by Slurm (`--bcast`) so a node needs nothing installed.
pub fn srun_on_node(
    job_id: &str,
    node: &str,
    program: &Path,
    bcast_to: &Path,
    args: &[String],
) -> Vec<String> {
    let mut argv: Vec<String> = [
        "srun".to_string(),
        format!("--jobid={job_id}"),
        "--overlap".into(),
        format!("--nodelist={node}"),
        "--nodes=1".into(),
        "--ntasks=1".into(),
        "--ntasks-per-node=1".into(),
        "--unbuffered".into(),
        format!("--bcast={}", bcast_to.display()),
        "--job-name=system-profile-node".into(),
    ]
    .into();
    argv.push(program.to_string_lossy().into_owned());
    argv.extend(args.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_its_job_and_its_part() {
        assert_eq!(job_and_step("1234"), ("1234", None));
        assert_eq!(job_and_step("1234.0"), ("1234", Some("0")));
        assert_eq!(job_and_step("1234.batch"), ("1234", Some("batch")));
        assert_eq!(job_and_step("1234."), ("1234", None));
    }

    #[test]
    fn srun_places_one_task_on_the_node_beside_the_job() {
        let argv = srun_on_node(
            "42",
            "gpu07",
            Path::new("/opt/sp/system-profile"),
            Path::new("/tmp/sp-node"),
            &["node".into()],
        );
        assert_eq!(argv[0], "srun");
        assert!(argv.contains(&"--jobid=42".to_string()));
        assert!(argv.contains(&"--overlap".to_string()));
        assert!(argv.contains(&"--nodelist=gpu07".to_string()));
        assert!(argv.contains(&"--bcast=/tmp/sp-node".to_string()));
        assert_eq!(
            argv[argv.len() - 2..],
            ["/opt/sp/system-profile".to_string(), "node".into()]
        );
    }
}
