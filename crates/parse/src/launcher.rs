//! Distributed launchers' command lines: `torchrun`, `python -m torch.distributed.run|launch`,
//! `accelerate launch` (or `python -m accelerate.commands.launch`) and `deepspeed`. Their
//! options are read without knowing every one: `--x=v` carries its value, a known switch takes
//! none, any other option takes the next word unless that word is an option itself; the first
//! word left is the entry point (a script, or a module after `-m`/`--module`).

use system_profile_model::target::{LauncherTarget, RankIds, RankProcess};

/// `python`, `python3`, `python3.11`, `pypy3`, by path or name.
pub fn is_python_interpreter(word: &str) -> bool {
    let name = word.rsplit('/').next().unwrap_or(word);
    if matches!(name, "python" | "python3" | "pypy3") {
        return true;
    }
    let Some(rest) = name.strip_prefix("python") else {
        return false;
    };
    let mut parts = rest.split('.');
    let whole =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    whole(parts.next()) && whole(parts.next()) && parts.next().is_none()
}

/// Options of the launchers that take no value.
const SWITCHES: &[&str] = &[
    // torchrun / torch.distributed.run / launch
    "--standalone",
    "--module",
    "-m",
    "--no-python",
    "--no_python",
    "--run-path",
    "--run_path",
    "--use-env",
    "--use_env",
    "--virtual-local-rank",
    "--virtual_local_rank",
    // accelerate launch
    "--cpu",
    "--multi_gpu",
    "--tpu",
    "--use_deepspeed",
    "--use_fsdp",
    "--use_megatron_lm",
    "--use_xpu",
    "--debug",
    "--quiet",
    "-q",
    "--same_network",
    "--enable_cpu_affinity",
    "--dynamo_use_fullgraph",
    "--dynamo_use_dynamic",
    "--ipex",
    // deepspeed
    "--no_local_rank",
    "--no_ssh_check",
    "--force_multi",
    "--elastic_training",
    "--bind_cores_to_rank",
    "--save_pid",
];

/// The launcher that `words` start with: its name and how many words name it.
pub fn launcher_name(words: &[String]) -> Option<(&'static str, usize)> {
    let first = words.first()?;
    let base = first.rsplit('/').next().unwrap_or(first);
    match base {
        "torchrun" => return Some(("torchrun", 1)),
        "deepspeed" => return Some(("deepspeed", 1)),
        "accelerate" if words.get(1).is_some_and(|w| w == "launch") => {
            return Some(("accelerate", 2))
        }
        _ => {}
    }
    if !is_python_interpreter(first) {
        return None;
    }
    // The interpreter's own options, then `-m <launcher module>`.
    let mut i = 1;
    while let Some(a) = words.get(i) {
        match a.as_str() {
            "-m" => break,
            "-X" | "-W" => i += 2,
            o if o.starts_with('-') && o != "-c" => i += 1,
            _ => return None,
        }
    }
    let module = words.get(i + 1)?;
    let name = match module.as_str() {
        "torch.distributed.run" => "torch.distributed.run",
        "torch.distributed.launch" => "torch.distributed.launch",
        "accelerate.commands.launch" => "accelerate",
        "deepspeed.launcher.runner" => "deepspeed",
        _ => return None,
    };
    Some((name, i + 2))
}

/// A launcher and its options at the start of `words`; the entry point is the first word
/// after the options (with `-m`, the module, as `["-m", module]`). Returns the launcher and
/// the words it used (through the entry point; the entry's arguments are the caller's).
pub fn read_launcher(words: &[String]) -> Option<(LauncherTarget, usize)> {
    let (program, named) = launcher_name(words)?;
    let mut options: Vec<(String, Option<String>)> = Vec::new();
    let mut i = named;
    let mut module = false;
    while let Some(w) = words.get(i) {
        if !w.starts_with('-') || w == "-" {
            break;
        }
        if w == "--" {
            i += 1;
            break;
        }
        if let Some((k, v)) = w.split_once('=') {
            options.push((k.to_string(), Some(v.to_string())));
            i += 1;
            continue;
        }
        if matches!(w.as_str(), "-m" | "--module") {
            module = true;
        }
        let takes_value = !SWITCHES.contains(&w.as_str())
            && words.get(i + 1).is_some_and(|n| !n.starts_with('-'));
        if takes_value {
            options.push((w.clone(), words.get(i + 1).cloned()));
            i += 2;
        } else {
            options.push((w.clone(), None));
            i += 1;
        }
    }
    let entry_word = words.get(i)?.clone();
    let value = |names: &[&str]| -> Option<String> {
        options
            .iter()
            .rev()
            .find(|(k, _)| names.contains(&k.as_str()))
            .and_then(|(_, v)| v.clone())
    };
    let has = |name: &str| options.iter().any(|(k, _)| k == name);
    let nnodes = value(&["--nnodes", "--num_machines", "--num_nodes"]);
    let nproc_per_node = value(&["--nproc_per_node", "--nproc-per-node", "--num_gpus"]);
    let node_rank =
        value(&["--node_rank", "--node-rank", "--machine_rank"]).and_then(|v| v.parse().ok());
    let rendezvous = value(&[
        "--rdzv_endpoint",
        "--rdzv-endpoint",
        "--main_process_ip",
        "--master_addr",
        "--master-addr",
    ])
    .map(|host| {
        let port = value(&["--main_process_port", "--master_port", "--master-port"]);
        match port {
            Some(p) if !host.contains(':') => format!("{host}:{p}"),
            _ => host,
        }
    })
    .or_else(|| has("--standalone").then(|| "standalone".to_string()));
    // `accelerate launch --cpu` always takes its simple launcher: one process, whatever
    // `--num_processes` says, unless mpirun is given a host file (accelerate's `launch_command`).
    let one_cpu_process = program == "accelerate" && has("--cpu") && !has("--mpirun_hostfile");
    let world_size = value(&["--num_processes"])
        .and_then(|v| v.parse::<u32>().ok())
        .map(|n| if one_cpu_process { 1 } else { n })
        .or_else(|| {
            let per_node: u32 = nproc_per_node.as_deref()?.parse().ok()?;
            let nodes: u32 = nnodes.as_deref().unwrap_or("1").parse().ok()?;
            Some(per_node * nodes)
        });
    let mut entry = Vec::new();
    if module {
        entry.push("-m".to_string());
    }
    entry.push(entry_word);
    Some((
        LauncherTarget {
            program: program.to_string(),
            argv: words[..i].to_vec(),
            entry,
            nnodes,
            nproc_per_node,
            node_rank,
            rendezvous,
            world_size,
            agents: Vec::new(),
            ranks: Vec::new(),
        },
        i + 1,
    ))
}

/// `RANK`, `LOCAL_RANK` and `GROUP_RANK` of a process, from its environment (variable →
/// value, as `sample::proc::environ` reads it).
pub fn rank_of(
    pid: u32,
    launcher_pid: Option<u32>,
    environ: &std::collections::HashMap<String, String>,
) -> Option<RankProcess> {
    let id = |k: &str| environ.get(k).and_then(|v| v.parse().ok());
    let ids = RankIds {
        rank: id("RANK"),
        local_rank: id("LOCAL_RANK"),
        node_rank: id("GROUP_RANK"),
    };
    ids.rank.map(|_| RankProcess {
        pid,
        launcher_pid,
        ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn torchrun_options_entry_and_world_size() {
        let w = words("torchrun --nproc_per_node 2 --standalone train.py --epochs 1");
        let (l, used) = read_launcher(&w).unwrap();
        assert_eq!(l.program, "torchrun");
        assert_eq!(l.argv, words("torchrun --nproc_per_node 2 --standalone"));
        assert_eq!(l.entry, words("train.py"));
        assert_eq!(used, 5, "the entry's own arguments are left to the caller");
        assert_eq!(l.nproc_per_node.as_deref(), Some("2"));
        assert_eq!(l.rendezvous.as_deref(), Some("standalone"));
        assert_eq!(l.world_size, Some(2));
    }

    #[test]
    fn two_nodes_with_a_rendezvous_and_equals_forms() {
        let w = words(
            "torchrun --nnodes=2 --nproc-per-node=2 --node_rank 1 --rdzv-endpoint 127.0.0.1:29500 --rdzv-backend c10d ddp/example.py",
        );
        let (l, _) = read_launcher(&w).unwrap();
        assert_eq!(l.nnodes.as_deref(), Some("2"));
        assert_eq!(l.node_rank, Some(1));
        assert_eq!(l.rendezvous.as_deref(), Some("127.0.0.1:29500"));
        assert_eq!(l.world_size, Some(4));
        assert_eq!(l.entry, words("ddp/example.py"));
    }

    #[test]
    fn python_m_forms_modules_and_other_launchers() {
        let (l, used) = read_launcher(&words(
            "python3 -u -m torch.distributed.run --nproc_per_node 2 -m pkg.train --lr 0.1",
        ))
        .unwrap();
        assert_eq!(l.program, "torch.distributed.run");
        assert_eq!(l.entry, words("-m pkg.train"));
        assert_eq!(used, 8);
        let (l, _) = read_launcher(&words(
            "accelerate launch --cpu --num_processes 2 --main_process_ip 10.0.0.1 --main_process_port 29501 nlp_example.py",
        ))
        .unwrap();
        assert_eq!(l.program, "accelerate");
        // `--cpu` runs one process (accelerate's simple launcher), as seen running it.
        assert_eq!(l.world_size, Some(1));
        assert_eq!(l.rendezvous.as_deref(), Some("10.0.0.1:29501"));
        assert_eq!(l.entry, words("nlp_example.py"));
        let (l, _) = read_launcher(&words(
            "accelerate launch --multi_gpu --num_processes 2 nlp_example.py",
        ))
        .unwrap();
        assert_eq!(l.world_size, Some(2));
        let (l, _) = read_launcher(&words("deepspeed --num_gpus 4 train.py --deepspeed")).unwrap();
        assert_eq!((l.program.as_str(), l.world_size), ("deepspeed", Some(4)));
        // Elastic ranges and `auto` are kept as given; no world size is made up.
        let (l, _) =
            read_launcher(&words("torchrun --nnodes 1:4 --nproc_per_node auto t.py")).unwrap();
        assert_eq!(l.nnodes.as_deref(), Some("1:4"));
        assert_eq!(l.world_size, None);
    }

    #[test]
    fn not_a_launcher_or_no_entry() {
        assert!(read_launcher(&words("python3 train.py")).is_none());
        assert!(read_launcher(&words("python3 -m http.server")).is_none());
        assert!(read_launcher(&words("accelerate config")).is_none());
        assert!(read_launcher(&words("torchrun --nproc_per_node 2")).is_none());
    }

    #[test]
    fn ranks_come_from_the_environment() {
        let env = |vars: &[(&str, &str)]| {
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::HashMap<_, _>>()
        };
        let all = env(&[
            ("PATH", "/bin"),
            ("RANK", "3"),
            ("LOCAL_RANK", "1"),
            ("GROUP_RANK", "1"),
            ("WORLD_SIZE", "4"),
        ]);
        let r = rank_of(42, Some(7), &all).unwrap();
        assert_eq!(
            (
                r.ids.rank,
                r.ids.local_rank,
                r.ids.node_rank,
                r.launcher_pid
            ),
            (Some(3), Some(1), Some(1), Some(7))
        );
        assert!(rank_of(42, None, &env(&[("PATH", "/bin")])).is_none());
    }
}
