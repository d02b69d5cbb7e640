//! A target started under a distributed launcher, or a running launcher and its ranks. The
//! launcher's command line is read by `parse::launcher`.

use super::*;
pub(super) use system_profile_parse::launcher::read_launcher;
use system_profile_parse::launcher::{launcher_name, rank_of};

/// The target is a program started under a launcher: its command is the launcher's whole
/// argv, its script or module is the entry point (read like one given alone, so the plan
/// sees its code), and the launcher is kept.
pub(super) fn set_launched(
    b: &mut Build<'_>,
    mut l: LauncherTarget,
    argv: &[String],
    cwd: &Path,
    answers: Option<&Answers>,
    outline_of: &dyn Fn(&Path) -> Option<PythonOutline>,
    python: &PythonChoice,
) {
    let mach = b.mach;
    l.entry.extend(argv.iter().cloned());
    // A launcher installed beside the interpreter (a venv's bin) but not on PATH runs from
    // there: the command must start the same program wherever the run's PATH points.
    if !l.argv[0].contains('/') && mach.which(&l.argv[0]).is_none() {
        let beside = python
            .executable
            .as_deref()
            .and_then(|e| Path::new(e).parent())
            .map(|d| d.join(&l.argv[0]));
        if let Some(found) = beside.filter(|p| mach.is_file(p)) {
            b.evidence(format!(
                "`{}` is not on PATH; the one beside the interpreter is used: {}",
                l.argv[0],
                found.display()
            ));
            l.argv[0] = found.to_string_lossy().into_owned();
        }
    }
    let mut command = l.argv.clone();
    command.extend(l.entry.iter().cloned());
    b.t.command = Some(command);
    b.t.python = Some(python.clone());
    let shape = [
        l.nnodes.as_ref().map(|n| format!("{n} node(s)")),
        l.nproc_per_node
            .as_ref()
            .map(|n| format!("{n} process(es) per node")),
        l.world_size.map(|w| format!("world size {w}")),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ");
    b.evidence(format!(
        "`{}` is a distributed launcher: every run starts the program under it, with the same options",
        l.program
    ));
    match l.entry.clone().as_slice() {
        [m, name, rest @ ..] if m == "-m" => {
            b.t.kind = TargetKind::PythonModule;
            let origin = answers.and_then(|a| a.specs.get(name).cloned().flatten());
            if origin.is_none() && answers.is_some() {
                b.ask(format!(
                    "Module `{name}` is not importable by {} (run from {}). Is another interpreter or directory needed?",
                    python.requested,
                    cwd.display()
                ));
            }
            b.t.summary = format!("`{name}` under {} ({shape})", l.program);
            b.t.module = Some(ModuleTarget {
                name: name.clone(),
                origin,
                argv: rest.to_vec(),
            });
        }
        [script, rest @ ..] => {
            b.t.kind = TargetKind::PythonScript;
            let path = resolve_path(mach, cwd, script);
            if !mach.is_file(&path) {
                b.ask(missing_path(mach, &path, script));
            } else {
                b.evidence(format!("{} exists", path.display()));
            }
            b.t.summary = format!("{} under {} ({shape})", path.display(), l.program);
            b.t.script = Some(ScriptTarget {
                path: path.to_string_lossy().into_owned(),
                argv: rest.to_vec(),
                outline: outline_of(&path),
            });
        }
        [] => {}
    }
    b.t.launcher = Some(l);
}

/// The launcher among the target's processes (or the parent of a rank given alone), with
/// every rank running under it, read from their environment.
pub(super) fn running_launcher(
    mach: &dyn Machine,
    processes: &[ProcessInfo],
    table: &crate::procinfo::Table,
) -> Option<LauncherTarget> {
    let as_launcher = |pid: u32| -> Option<LauncherTarget> {
        let c = &table.get(pid)?.cmdline;
        // `python /venv/bin/torchrun ...`: the interpreter runs the launcher's script.
        let from = usize::from(
            c.len() > 1
                && is_python_interpreter(&c[0])
                && !is_python_interpreter(&c[1])
                && launcher_name(&c[1..]).is_some(),
        );
        read_launcher(&c[from..]).map(|(mut l, used)| {
            l.entry.extend(c[from + used..].iter().cloned());
            l
        })
    };
    // Every agent among the processes (or their parents): one per node of the job here.
    let mut agents: Vec<(u32, LauncherTarget)> = Vec::new();
    for p in processes {
        let parent = table.get(p.pid).map(|s| s.ppid);
        let found = [Some(p.pid), parent]
            .into_iter()
            .flatten()
            .find_map(|pid| as_launcher(pid).map(|l| (pid, l)));
        if let Some((pid, l)) = found {
            if !agents.iter().any(|(a, _)| *a == pid) {
                agents.push((pid, l));
            }
        }
    }
    // The first node's agent describes the job; the others add their ranks.
    agents.sort_by_key(|(pid, l)| (l.node_rank.unwrap_or(0), *pid));
    let (_, mut l) = agents.first()?.clone();
    for (agent_pid, _) in &agents {
        l.agents.push(*agent_pid);
        for pid in table.tree(*agent_pid).into_iter().skip(1) {
            let environ = mach.environ(pid);
            if let Some(r) = rank_of(pid, Some(*agent_pid), &environ) {
                // A rank's own children (data loader workers) inherit RANK: keep the rank.
                let parent_is_rank = table
                    .get(pid)
                    .is_some_and(|s| l.ranks.iter().any(|r| r.pid == s.ppid));
                if !parent_is_rank {
                    l.ranks.push(r);
                }
            }
        }
    }
    l.ranks.sort_by_key(|r| r.ids.rank);
    Some(l)
}
