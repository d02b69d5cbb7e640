//! Ray's state API as its CLI prints it (`ray list nodes --format json`, `ray list actors
//! --format json --filter state=ALIVE`): the nodes that are alive and the live actors on them,
//! as one cluster job. Ray's nodes have no names of their own (several may share an IP): a
//! node is named `head-`/`node-` and the first 8 characters of its id, as the node part is.

use serde::Deserialize;
use system_profile_model::target::ClusterJob;
use system_profile_model::{Diag, Parsed};

#[derive(Deserialize)]
struct Node {
    node_id: String,
    #[serde(default)]
    is_head_node: bool,
    #[serde(default)]
    state: String,
}

#[derive(Deserialize)]
struct Actor {
    node_id: Option<String>,
    #[serde(default)]
    job_id: String,
    #[serde(default)]
    state: String,
}

/// A Ray node's name for the report.
pub fn node_name(node_id: &str, is_head: bool) -> String {
    let short: String = node_id.chars().take(8).collect();
    format!("{}-{short}", if is_head { "head" } else { "node" })
}

/// The cluster's live actors of job `job` (every job's when empty) and the nodes they run on.
pub fn cluster_job(nodes_json: &str, actors_json: &str, job: &str) -> Parsed<Option<ClusterJob>> {
    let mut diagnostics = Vec::new();
    let nodes: Vec<Node> = serde_json::from_str(nodes_json.trim()).unwrap_or_else(|e| {
        diagnostics.push(Diag::general(format!("not `ray list nodes` JSON: {e}")));
        Vec::new()
    });
    let actors: Vec<Actor> = serde_json::from_str(actors_json.trim()).unwrap_or_else(|e| {
        diagnostics.push(Diag::general(format!("not `ray list actors` JSON: {e}")));
        Vec::new()
    });
    if nodes.is_empty() {
        return Parsed {
            value: None,
            diagnostics,
        };
    }
    let mine: Vec<&Actor> = actors
        .iter()
        .filter(|a| a.state == "ALIVE" && (job.is_empty() || a.job_id == job))
        .collect();
    let names: Vec<String> = nodes
        .iter()
        .filter(|n| n.state == "ALIVE")
        .filter(|n| {
            mine.iter()
                .any(|a| a.node_id.as_deref() == Some(&n.node_id))
        })
        .map(|n| node_name(&n.node_id, n.is_head_node))
        .collect();
    Parsed {
        value: Some(ClusterJob {
            engine: "ray".into(),
            job_id: job.to_string(),
            name: None,
            user: None,
            state: if mine.is_empty() {
                "NO_ACTORS"
            } else {
                "RUNNING"
            }
            .into(),
            node_list: None,
            num_nodes: Some(names.len() as u32),
            nodes: names,
            num_tasks: Some(mine.len() as u32),
            work_dir: None,
            steps: Vec::new(),
            step: None,
        }),
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actors_place_the_job_on_their_nodes() {
        let nodes = r#"[{"node_id": "45af350b358b", "is_head_node": true, "state": "ALIVE"},
                        {"node_id": "a69e0d2bed3d", "is_head_node": false, "state": "ALIVE"},
                        {"node_id": "ffff0000aaaa", "is_head_node": false, "state": "ALIVE"}]"#;
        let actors = r#"[{"node_id": "45af350b358b", "job_id": "01000000", "state": "ALIVE"},
                         {"node_id": "a69e0d2bed3d", "job_id": "01000000", "state": "ALIVE"},
                         {"node_id": "ffff0000aaaa", "job_id": "02000000", "state": "ALIVE"}]"#;
        let job = cluster_job(nodes, actors, "01000000").value.unwrap();
        assert_eq!(job.nodes, vec!["head-45af350b", "node-a69e0d2b"]);
        assert_eq!((job.state.as_str(), job.num_tasks), ("RUNNING", Some(2)));
        let all = cluster_job(nodes, actors, "").value.unwrap();
        assert_eq!(all.nodes.len(), 3);
        let none = cluster_job(nodes, actors, "09000000").value.unwrap();
        assert_eq!(none.state, "NO_ACTORS");
        assert!(cluster_job("not json", "[]", "").value.is_none());
    }
}
