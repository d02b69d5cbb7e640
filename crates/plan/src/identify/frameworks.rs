//! Frameworks: which recipe a script, program or process belongs to, the facts read from its command line, its processes, systemd units.

use super::*;

/// The framework a script, command or process belongs to, by its imports, calls and program.
pub(super) fn select_framework<'r>(
    recipes: &'r Recipes,
    outline: Option<&PythonOutline>,
    program: Option<&str>,
) -> Option<(&'r Recipe, String)> {
    let mut best: Option<(i32, usize, &Recipe, String)> = None;
    for r in recipes.frameworks() {
        let mut score = 0;
        let mut why = String::new();
        if let Some(prog) = program {
            let base = prog.rsplit('/').next().unwrap_or(prog);
            if r.select.programs.iter().any(|p| p == base) {
                score = 2;
                why = format!("the program is `{base}`");
            }
        }
        if let Some(o) = outline {
            let imports: Vec<&String> = r
                .select
                .imports
                .iter()
                .filter(|i| o.imports.contains(i))
                .collect();
            if !imports.is_empty() {
                let called = |c: &String| {
                    o.module_level_calls.contains(c)
                        || o.defs.iter().any(|d| d.notable_calls.contains(c))
                };
                let calls: Vec<&String> = r.select.calls.iter().filter(|c| called(c)).collect();
                if r.select.calls.is_empty() || !calls.is_empty() {
                    let s = 1 + i32::from(!calls.is_empty());
                    if s > score {
                        score = s;
                        why = if calls.is_empty() {
                            format!("the code imports {}", join_ticks(&imports))
                        } else {
                            format!(
                                "the code imports {} and calls {}",
                                join_ticks(&imports),
                                join_ticks(&calls)
                            )
                        };
                    }
                }
            }
        }
        if score > 0 {
            let key = (r.select.priority, score as usize);
            if best.as_ref().is_none_or(|(p, s, _, _)| key > (*p, *s)) {
                best = Some((key.0, key.1, r, why));
            }
        }
    }
    best.map(|(_, _, r, why)| (r, why))
}

pub(super) fn join_ticks(items: &[&String]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Read a recipe's facts from a command line: `--flag value`, `--flag=value`, `word value`.
pub(super) fn read_facts(recipe: &Recipe, cmdline: &[String]) -> BTreeMap<String, String> {
    let mut facts = BTreeMap::new();
    for f in &recipe.facts {
        let mut value = None;
        for (i, a) in cmdline.iter().enumerate() {
            for flag in &f.flags {
                if a == flag {
                    value = cmdline.get(i + 1).cloned();
                } else if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
                    value = Some(v.to_string());
                }
            }
            if value.is_none() && f.after.iter().any(|w| w == a) {
                value = cmdline.get(i + 1).filter(|v| !v.starts_with('-')).cloned();
            }
            if value.is_some() {
                break;
            }
        }
        if let Some(v) = value.or_else(|| f.default.clone()) {
            facts.insert(f.name.clone(), v);
        }
    }
    facts
}

pub(super) fn short_cmdline(p: &ProcessInfo) -> String {
    let line = p.cmdline.join(" ");
    if line.chars().count() > 80 {
        format!("{}…", line.chars().take(79).collect::<String>())
    } else {
        line
    }
}

/// A framework's processes now: components, their processes (with roles) and its facts.
pub(super) fn framework_match(
    mach: &dyn Machine,
    recipe: &Recipe,
    table: &Table,
    matched_words: Vec<String>,
    answers: Option<&Answers>,
    launch_argv: Option<&[String]>,
) -> (FrameworkMatch, Vec<ProcessInfo>) {
    let comps = table.components(recipe);
    // Every component process plays its component; other descendants are its plumbing.
    let role_of = |pid: u32| {
        comps
            .iter()
            .find(|(_, pids)| pids.contains(&pid))
            .map(|(name, _)| name.clone())
    };
    let mut processes: Vec<ProcessInfo> = Vec::new();
    let mut seen: Vec<u32> = Vec::new();
    for (name, pids) in &comps {
        for pid in pids {
            for member in table.tree(*pid) {
                if seen.contains(&member) {
                    continue;
                }
                seen.push(member);
                if let Some(snap) = table.get(member) {
                    let mut info = table.info(mach, snap);
                    info.role = Some(role_of(member).unwrap_or_else(|| format!("child of {name}")));
                    processes.push(info);
                }
            }
        }
    }
    let first_cmdline = comps
        .iter()
        .flat_map(|(_, pids)| pids.first())
        .find_map(|pid| table.get(*pid).map(|p| p.cmdline.clone()));
    let facts = match (launch_argv, first_cmdline) {
        (Some(argv), _) => read_facts(recipe, argv),
        (None, Some(cmd)) => read_facts(recipe, &cmd),
        (None, None) => BTreeMap::new(),
    };
    let package_version = recipe
        .package
        .as_ref()
        .and_then(|p| answers.and_then(|a| a.versions.get(p).cloned().flatten()));
    let m = FrameworkMatch {
        recipe: recipe.id.clone(),
        name: recipe.name.clone(),
        matched_words,
        components: recipe
            .components
            .iter()
            .zip(&comps)
            .map(|(c, (_, pids))| ComponentMatch {
                name: c.name.clone(),
                description: c.description.clone(),
                pids: pids.clone(),
            })
            .collect(),
        entry_points: recipe.entry_points.clone(),
        package: recipe.package.clone(),
        package_version,
        facts,
    };
    (m, processes)
}

pub(super) fn describe_processes(processes: &[ProcessInfo]) -> String {
    processes
        .iter()
        .map(|p| match &p.role {
            Some(r) => format!("{} ({r})", p.pid),
            None => format!("{} (`{}`)", p.pid, short_cmdline(p)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Folders never searched for a framework's scripts: environments and caches.
const NOT_SEARCHED: [&str; 5] = [
    "site-packages",
    "node_modules",
    "__pycache__",
    "venv",
    "target",
];
/// At most this many scripts named, and this many files read, two levels deep.
const SCRIPTS_NAMED: usize = 5;
const FILES_READ: usize = 2000;
const SCRIPT_MAX_BYTES: u64 = 1 << 20;

/// The Python files of `dir` and its subfolders (one level) that import one of the recipe's
/// packages and call one of its calls, relative to `dir`, sorted.
pub(super) fn scripts_calling(
    mach: &dyn Machine,
    dir: &Path,
    select: &system_profile_model::recipe::Select,
) -> Vec<String> {
    if select.calls.is_empty() {
        return Vec::new();
    }
    let mut files = Vec::new();
    let mut folders = vec![(dir.to_path_buf(), 0)];
    while let Some((folder, depth)) = folders.pop() {
        for (name, kind) in mach.list_dir(&folder) {
            let path = folder.join(&name);
            match kind {
                FileKind::Dir
                    if depth < 1
                        && !name.starts_with('.')
                        && !NOT_SEARCHED.contains(&name.as_str()) =>
                {
                    folders.push((path, depth + 1))
                }
                FileKind::File { bytes, .. }
                    if name.ends_with(".py")
                        && bytes <= SCRIPT_MAX_BYTES
                        && files.len() < FILES_READ =>
                {
                    files.push(path)
                }
                _ => {}
            }
        }
    }
    let imports = |text: &str| {
        select.imports.is_empty()
            || text.lines().any(|l| {
                let l = l.trim_start();
                select.imports.iter().any(|p| {
                    l.strip_prefix("import ")
                        .or_else(|| l.strip_prefix("from "))
                        .is_some_and(|rest| {
                            rest == p
                                || rest.starts_with(&format!("{p}."))
                                || rest.starts_with(&format!("{p} "))
                        })
                })
            })
    };
    let mut found: Vec<String> = files
        .into_iter()
        .filter(|f| {
            mach.read_head(f, SCRIPT_MAX_BYTES as usize)
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .is_some_and(|text| {
                    imports(&text) && select.calls.iter().any(|c| text.contains(&format!("{c}(")))
                })
        })
        .filter_map(|f| {
            f.strip_prefix(dir)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        })
        .collect();
    found.sort();
    found.truncate(SCRIPTS_NAMED);
    found
}

pub(super) fn name_framework(
    b: &mut Build<'_>,
    recipe: &Recipe,
    m: FrameworkMatch,
    procs: Vec<ProcessInfo>,
    table: &Table,
    cwd: &Path,
) {
    let mach = b.mach;
    debug_assert_eq!(recipe.role, RecipeRole::Framework);
    let running: Vec<u32> = m.components.iter().flat_map(|c| c.pids.clone()).collect();
    match (&m.package, &m.package_version) {
        (Some(p), Some(v)) => b.evidence(format!("{p} {v} is installed")),
        (Some(p), None) => b.evidence(format!("{p} is not installed in the chosen interpreter")),
        _ => {}
    }
    if running.is_empty() {
        let mut q = format!(
            "No {} process is running now. Start it with one of: {} — which command should I run (or which PID, once it runs)?",
            recipe.name,
            recipe.entry_points.iter().map(|e| format!("`{e}`")).collect::<Vec<_>>().join(", ")
        );
        let found = scripts_calling(mach, cwd, &recipe.select);
        if let Some(first) = found.first() {
            q.push_str(&format!(
                " Scripts here that call {}: {}",
                recipe.select.calls.join("/"),
                found
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            if let Some(e) = recipe.entry_points.first() {
                q.push_str(&format!(
                    "; for example `{}`",
                    e.replace("<N>", "2").replace("train.py", first)
                ));
            }
            q.push('.');
        }
        b.ask(q);
        b.t.summary = format!("{}: not running", recipe.name);
    } else {
        let roots = table.roots(&running);
        for c in &m.components {
            if !c.pids.is_empty() {
                b.evidence(format!(
                    "{} {}: {}",
                    recipe.name,
                    c.name,
                    c.pids
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        if roots.len() > 1 {
            let listed: Vec<String> = roots
                .iter()
                .filter_map(|r| procs.iter().find(|p| p.pid == *r))
                .map(|p| {
                    let role = p.role.clone().unwrap_or_default();
                    let kids: Vec<String> = procs
                        .iter()
                        .filter(|c| table.tree(p.pid).contains(&c.pid) && c.pid != p.pid)
                        .map(|c| c.pid.to_string())
                        .collect();
                    if kids.is_empty() {
                        format!("{} ({role})", p.pid)
                    } else {
                        format!("{} ({role}; with {})", p.pid, kids.join(", "))
                    }
                })
                .collect();
            b.ask(format!(
                "{} separate {} instances are running: {}. Which one (a PID), or all of them?",
                roots.len(),
                recipe.name,
                listed.join(", ")
            ));
        }
        b.t.summary = format!("{}: {}", recipe.name, describe_processes(&procs));
    }
    b.t.processes = procs;
    b.t.framework = Some(m);
}
