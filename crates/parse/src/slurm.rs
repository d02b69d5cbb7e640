//! Slurm's own words about a job: `scontrol show job -o <id>` (one line of `Key=Value` pairs;
//! a value may hold spaces only in the last fields we do not read), `squeue -h -o
//! '%i|%j|%u|%T|%N'` rows and `squeue -h --steps -o '%i|%j|%N|%A'` rows. The node list stays Slurm's compressed form (`gpu[01-04]`):
//! `scontrol show hostnames` expands it, on the machine that asks.

use system_profile_model::target::{ClusterJob, JobStep};
use system_profile_model::{Diag, Parsed};

/// One job from `scontrol show job -o`; several lines (a job array) give the first.
pub fn parse_job(input: &str) -> Parsed<Option<ClusterJob>> {
    let Some(line) = input.lines().find(|l| l.starts_with("JobId=")) else {
        return Parsed {
            value: None,
            diagnostics: vec![Diag::general(
                "no `JobId=` line: not `scontrol show job -o` output",
            )],
        };
    };
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .filter(|v| *v != "(null)" && !v.is_empty())
            .map(str::to_string)
    };
    let number = |key: &str| field(key).and_then(|v| v.parse::<u32>().ok());
    let Some(job_id) = field("JobId") else {
        return Parsed {
            value: None,
            diagnostics: vec![Diag::general("`JobId=` without a value")],
        };
    };
    let mut diagnostics = Vec::new();
    let node_list = field("NodeList");
    if node_list.is_none() {
        diagnostics.push(Diag::general(format!(
            "job {job_id} has no NodeList (not started yet?)"
        )));
    }
    Parsed {
        value: Some(ClusterJob {
            engine: "slurm".into(),
            job_id,
            name: field("JobName"),
            user: field("UserId").map(|u| u.split('(').next().unwrap_or(&u).to_string()),
            state: field("JobState").unwrap_or_default(),
            node_list,
            nodes: Vec::new(),
            num_nodes: number("NumNodes"),
            num_tasks: number("NumTasks"),
            work_dir: field("WorkDir"),
            steps: Vec::new(),
            step: None,
        }),
        diagnostics,
    }
}

/// A row of `squeue -h -o '%i|%j|%u|%T|%N'`: id, name, user, state, node list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRow {
    pub job_id: String,
    pub name: String,
    pub user: String,
    pub state: String,
    pub node_list: String,
}

/// `squeue`'s `|`-separated rows, each made by `row` from its fields; a line `row` refuses
/// (not `fields` long) is skipped and said.
fn pipe_rows<T>(input: &str, fields: &str, row: impl Fn(&[&str]) -> Option<T>) -> Parsed<Vec<T>> {
    let mut diagnostics = Vec::new();
    let mut rows = Vec::new();
    for (i, line) in input
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let f: Vec<&str> = line.trim().split('|').collect();
        match row(&f) {
            Some(r) => rows.push(r),
            None => diagnostics.push(Diag::at(
                i + 1,
                format!("not {fields} `|`-separated fields"),
            )),
        }
    }
    Parsed {
        value: rows,
        diagnostics,
    }
}

/// The rows of `squeue -h -o '%i|%j|%u|%T|%N'`; a line that is not five fields is skipped and
/// said.
pub fn parse_queue(input: &str) -> Parsed<Vec<QueueRow>> {
    pipe_rows(input, "five", |f| match *f {
        [job_id, name, user, state, node_list] => Some(QueueRow {
            job_id: job_id.into(),
            name: name.into(),
            user: user.into(),
            state: state.into(),
            node_list: node_list.into(),
        }),
        _ => None,
    })
}

/// The running steps of `squeue -h --steps -o '%i|%j|%N|%A'`: step id, name, node list,
/// tasks; a line that is not four fields is skipped and said.
pub fn parse_steps(input: &str) -> Parsed<Vec<JobStep>> {
    pipe_rows(input, "four", |f| match *f {
        [step_id, name, node_list, tasks] => Some(JobStep {
            step_id: step_id.into(),
            name: name.into(),
            node_list: node_list.into(),
            tasks: tasks.trim().parse().ok(),
        }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_rows_and_a_bad_line() {
        let p = parse_queue("3|train-ddp|root|RUNNING|vm\nnonsense\n4|eval|ana|PENDING|\n");
        assert_eq!(p.value.len(), 2);
        assert_eq!(p.value[0].node_list, "vm");
        assert_eq!(p.value[1].state, "PENDING");
        assert_eq!(p.diagnostics.len(), 1);
    }

    /// As this machine's Slurm (Debian's slurm-wlm) printed a two-node job's steps.
    #[test]
    fn steps_and_a_bad_line() {
        let p = parse_steps("1.0|train|n[1-2]|2\n1.batch|batch|n1|1\n1.1|x\n");
        assert_eq!(p.value.len(), 2);
        assert_eq!(
            (
                p.value[0].step_id.as_str(),
                p.value[0].node_list.as_str(),
                p.value[0].tasks
            ),
            ("1.0", "n[1-2]", Some(2))
        );
        assert_eq!(p.diagnostics.len(), 1);
    }

    #[test]
    fn an_error_message_is_no_job() {
        let p = parse_job("slurm_load_jobs error: Invalid job id specified\n");
        assert!(p.value.is_none());
        assert_eq!(p.diagnostics.len(), 1);
    }
}
