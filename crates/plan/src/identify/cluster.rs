//! A job of a cluster engine named by the user (`slurm job 1234`, by name, or "my slurm
//! job"), resolved through the engine: one running job is the target; none, several or one not
//! running is a question.

use super::*;
use machine::{ClusterErrorKind, QueueRow};

pub(super) async fn resolve_slurm(b: &mut Build<'_>, words: &SlurmWords) {
    let mach = b.mach;
    let id = match words {
        SlurmWords::Id(id) => id.clone(),
        SlurmWords::Name(_) | SlurmWords::Mine => {
            let queue = match mach.slurm_queue().await {
                Ok(q) => q,
                Err(e) => return asked_engine_failed(b, &e),
            };
            let me = mach.user_name();
            let candidates: Vec<&QueueRow> = queue
                .iter()
                .filter(|r| match words {
                    SlurmWords::Name(name) => &r.name == name,
                    _ => me.as_deref() == Some(r.user.as_str()) && r.state == "RUNNING",
                })
                .collect();
            match candidates[..] {
                [one] => one.job_id.clone(),
                [] => {
                    let what = match words {
                        SlurmWords::Name(name) => format!("No Slurm job is named `{name}`"),
                        _ => "You have no running Slurm job".to_string(),
                    };
                    return b.ask(format!(
                        "{what} ({} in the queue). Which job id (`slurm job <id>`)?",
                        queue.len()
                    ));
                }
                _ => {
                    let listed: Vec<String> = candidates
                        .iter()
                        .map(|r| {
                            format!("{} (`{}`, {}, {})", r.job_id, r.name, r.state, r.node_list)
                        })
                        .collect();
                    return b.ask(format!(
                        "Several Slurm jobs match: {}. Which one (`slurm job <id>`)?",
                        listed.join(", ")
                    ));
                }
            }
        }
    };
    let (job_id, step) = system_profile_cluster::job_and_step(&id);
    let mut job = match mach.slurm_job(job_id).await {
        Ok(job) => job,
        Err(e) => return asked_engine_failed(b, &e),
    };
    if let Some(step) = step {
        let full = format!("{job_id}.{step}");
        // A controller that lists no step leaves the step unchecked, for the node part.
        if !job.steps.is_empty() && !job.steps.iter().any(|s| s.step_id == full) {
            b.ask(format!(
                "Slurm job {job_id} has no running step {full}: its steps are {}. Which one, or the whole job (`slurm job {job_id}`)?",
                job.steps_phrase()
            ));
        }
        job.step = Some(full);
    }
    b.evidence(format!(
        "Slurm job {} (`{}`) is {} on {}",
        job.job_id,
        job.name.as_deref().unwrap_or("unnamed"),
        job.state,
        job.node_list.as_deref().unwrap_or("no node yet")
    ));
    if job.state != "RUNNING" {
        b.ask(format!(
            "Slurm job {} is {}: only a running job can be observed on its nodes. Profile it once it runs, or name another job.",
            job.job_id, job.state
        ));
    }
    if !job.steps.is_empty() {
        b.evidence(format!("its running steps: {}", job.steps_phrase()));
    }
    b.t.kind = TargetKind::ClusterJob;
    b.t.summary = format!(
        "Slurm job {}{}{} on {} node(s): {}",
        job.job_id,
        job.name
            .as_deref()
            .map(|n| format!(" (`{n}`)"))
            .unwrap_or_default(),
        job.step
            .as_deref()
            .map(|s| format!(", step {s} only,"))
            .unwrap_or_default(),
        job.nodes.len(),
        job.nodes.join(", ")
    );
    b.t.cluster = Some(job);
}

fn asked_engine_failed(b: &mut Build<'_>, e: &machine::ClusterError) {
    match e.kind {
        ClusterErrorKind::NoEngine => b.ask(format!(
            "{}. Run the server on a machine of the cluster (a login node), or name a process here.",
            e.message
        )),
        ClusterErrorKind::NoSuchJob => b.ask(format!(
            "{}. Which job id (`squeue --me` lists yours)?",
            e.message
        )),
        ClusterErrorKind::Failed => b.ask(format!(
            "The cluster engine did not answer: {}. Is its controller (Slurm) or head node (Ray) reachable from here?",
            e.message
        )),
    }
}

/// A Ray job's live actors (or every live actor of the cluster) through Ray's state API.
pub(super) async fn resolve_ray(b: &mut Build<'_>, job: &str) {
    let mach = b.mach;
    let found = match mach.ray_job(job).await {
        Ok(found) => found,
        Err(e) => return asked_engine_failed(b, &e),
    };
    let what = if job.is_empty() {
        "the Ray cluster".to_string()
    } else {
        format!("Ray job {job}")
    };
    b.evidence(format!(
        "{what}: {} live actor(s) on {} node(s) ({})",
        found.num_tasks.unwrap_or(0),
        found.nodes.len(),
        found.nodes.join(", ")
    ));
    if found.state != "RUNNING" {
        b.ask(format!(
            "{what} has no live actor: its processes are Ray's actors, and none runs now. Which job (`ray job <id>`; `ray list jobs` lists them)?"
        ));
    }
    b.t.kind = TargetKind::ClusterJob;
    b.t.summary = format!(
        "{what}: its actors on {} node(s): {}",
        found.nodes.len(),
        found.nodes.join(", ")
    );
    b.t.cluster = Some(found);
}

/// A framework named by its words alone whose recipe runs on a cluster engine (Ray for vLLM's
/// multi-node serving, or a Ray application): when that engine has its actors on two nodes or
/// more, the target is the cluster's job. Anything else (no engine here, one node) leaves the
/// framework to be matched on this machine.
pub(super) async fn spans_a_cluster(
    b: &mut Build<'_>,
    reading: &Reading,
    recipes: &Recipes,
) -> bool {
    if reading.main.is_some() || !reading.pids.is_empty() || !reading.ports.is_empty() {
        return false;
    }
    let engine = reading
        .frameworks
        .first()
        .and_then(|(_, id)| recipes.get(id))
        .and_then(|r| r.cluster_engine.clone());
    if engine.as_deref() != Some("ray") {
        return false;
    }
    match b.mach.ray_job("").await {
        Ok(job) if job.nodes.len() >= 2 => {
            b.evidence(format!(
                "`{}` runs on Ray, whose actors are on {} nodes here: the target is the cluster",
                reading.frameworks[0].0,
                job.nodes.len()
            ));
            resolve_ray(b, "").await;
            true
        }
        // Said, so that a question about local processes that follows is not a mystery.
        Ok(job) => {
            b.evidence(format!(
                "Ray's state API lists actors on {} node(s) here: matched on this machine's processes",
                job.nodes.len()
            ));
            false
        }
        Err(e) if e.kind == ClusterErrorKind::NoEngine => false,
        Err(e) => {
            b.evidence(format!(
                "Ray's state API did not answer ({}): matched on this machine's processes",
                e.message
            ));
            false
        }
    }
}
