//! Resolving what the words named: a program, a function, a word (a service, a program on PATH, a module), PIDs.

use super::*;

pub(super) fn set_program(
    b: &mut Build<'_>,
    argv0: &str,
    path: Option<PathBuf>,
    argv: &[String],
    words: &[String],
    python: &PythonChoice,
) {
    let mach = b.mach;
    b.t.kind = TargetKind::Command;
    let is_python = is_python_interpreter(argv0)
        || path.as_deref().is_some_and(|p| has_python_shebang(mach, p));
    let mut command = vec![argv0.to_string()];
    if argv0 == "-c" || (is_python_interpreter(argv0) && words.iter().any(|w| w == "-c")) {
        // `python -c code`: keep the words as given after the interpreter.
        command = words
            .iter()
            .skip_while(|w| w.as_str() != argv0)
            .cloned()
            .collect();
    } else {
        command.extend(argv.iter().cloned());
    }
    if let Some(p) = &path {
        b.evidence(format!("{} is an executable program", p.display()));
    }
    if is_python {
        b.t.python = Some(python.clone());
    }
    b.t.summary = format!("the command `{}`", command.join(" "));
    b.t.program = Some(CommandTarget {
        argv: command.clone(),
        program_path: path.map(|p| p.to_string_lossy().into_owned()),
        is_python,
    });
    b.t.command = Some(command);
}

pub(super) fn resolve_function(
    b: &mut Build<'_>,
    raw: &str,
    file: Option<PathBuf>,
    module: Option<String>,
    spec: FunctionSpec,
    outline_of: &dyn Fn(&Path) -> Option<PythonOutline>,
    python: &PythonChoice,
) {
    let mach = b.mach;
    let Some(file) = file else {
        b.ask(format!(
            "Module `{}` of `{raw}` is not importable by {}. Which file is it in?",
            module.unwrap_or_default(),
            python.requested
        ));
        return;
    };
    if !mach.is_file(&file) {
        let name = file.to_string_lossy().into_owned();
        b.ask(missing_path(mach, &file, &name));
        return;
    }
    let Some(outline) = outline_of(&file) else {
        b.ask(format!(
            "{} could not be read by {}: which interpreter should read it?",
            file.display(),
            python.requested
        ));
        return;
    };
    if let Some(err) = &outline.error {
        b.ask(format!(
            "{} does not parse ({err}). Is it Python 3 for {}?",
            file.display(),
            python.requested
        ));
        return;
    }
    let path = file.to_string_lossy().into_owned();
    let mut loc = CodeLocation {
        path: path.clone(),
        qualname: None,
        module: module.clone(),
        start_line: 0,
        end_line: 0,
        def: None,
        outline: None,
    };
    match spec {
        FunctionSpec::Qualname(name) => {
            let exact = outline.defs.iter().find(|d| d.qualname == name);
            let by_tail: Vec<_> = outline
                .defs
                .iter()
                .filter(|d| d.qualname.rsplit('.').next() == Some(name.as_str()))
                .collect();
            let def = match (exact, by_tail.as_slice()) {
                (Some(d), _) => d.clone(),
                (None, [d]) => {
                    b.evidence(format!("`{name}` is `{}` in {path}", d.qualname));
                    (*d).clone()
                }
                (None, []) => {
                    let names: Vec<&str> =
                        outline.defs.iter().map(|d| d.qualname.as_str()).collect();
                    let mut close: Vec<(f64, &str)> = names
                        .iter()
                        .map(|n| {
                            let tail = n.rsplit('.').next().unwrap_or(n);
                            let score = strsim::jaro_winkler(n, &name)
                                .max(strsim::jaro_winkler(tail, &name));
                            (score, *n)
                        })
                        .filter(|(s, _)| *s > 0.75)
                        .collect();
                    close.sort_by(|a, b| b.0.total_cmp(&a.0));
                    let hint = if close.is_empty() {
                        format!(
                            "It defines: {}",
                            names
                                .iter()
                                .take(12)
                                .copied()
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    } else {
                        format!(
                            "Did you mean {}",
                            close
                                .iter()
                                .take(3)
                                .map(|c| format!("`{}`", c.1))
                                .collect::<Vec<_>>()
                                .join(" or ")
                        )
                    };
                    b.ask(format!("{path} has no function or class `{name}`. {hint}?"));
                    loc.outline = Some(outline);
                    b.t.function = Some(loc);
                    return;
                }
                (None, many) => {
                    let names: Vec<String> = many
                        .iter()
                        .map(|d| format!("`{}` (line {})", d.qualname, d.def_line))
                        .collect();
                    b.ask(format!(
                        "{} definitions are named `{name}` in {path}: {}. Which one?",
                        many.len(),
                        names.join(", ")
                    ));
                    loc.outline = Some(outline);
                    b.t.function = Some(loc);
                    return;
                }
            };
            b.evidence(format!(
                "`{}` is a {} at lines {}-{} of {path}",
                def.qualname,
                def.def_kind.replace('_', " "),
                def.start_line,
                def.end_line
            ));
            loc.qualname = Some(def.qualname.clone());
            loc.start_line = def.start_line;
            loc.end_line = def.end_line;
            loc.def = Some(def);
        }
        FunctionSpec::Lines(start, end) => {
            if start == 0 || end < start || end > outline.lines {
                b.ask(format!(
                    "Lines {start}-{end} are not inside {path}, which has {} lines. Which lines?",
                    outline.lines
                ));
                loc.outline = Some(outline);
                b.t.function = Some(loc);
                return;
            }
            loc.start_line = start;
            loc.end_line = end;
            // The innermost function or method holding the whole range.
            let enclosing = outline
                .defs
                .iter()
                .filter(|d| d.def_kind != "class" && d.start_line <= start && end <= d.end_line)
                .min_by_key(|d| d.end_line - d.start_line);
            match enclosing {
                Some(d) => {
                    loc.qualname = Some(d.qualname.clone());
                    b.evidence(format!(
                        "lines {start}-{end} of {path} are inside `{}` (lines {}-{})",
                        d.qualname, d.start_line, d.end_line
                    ));
                }
                None => b.evidence(format!(
                    "lines {start}-{end} of {path} are module-level code"
                )),
            }
        }
    }
    b.t.summary = match &loc.qualname {
        Some(q) if loc.def.is_some() => format!(
            "`{q}` in {path} (lines {}-{})",
            loc.start_line, loc.end_line
        ),
        Some(q) => format!(
            "lines {}-{} of {path}, in `{q}`",
            loc.start_line, loc.end_line
        ),
        None => format!("lines {}-{} of {path}", loc.start_line, loc.end_line),
    };
    // What runs it: the file itself when it is a script, else the caller must say.
    if outline.has_main_guard || module.is_none() {
        b.t.command = Some(vec![
            python
                .executable
                .clone()
                .unwrap_or(python.requested.clone()),
            path.clone(),
        ]);
        if !outline.has_main_guard {
            b.evidence(format!(
                "{path} has no `if __name__ == \"__main__\":`; running it runs only its module-level code"
            ));
        }
    }
    loc.outline = Some(outline);
    b.t.function = Some(loc);
}

pub(super) async fn resolve_word(
    b: &mut Build<'_>,
    word: &str,
    argv: &[String],
    table: &Table,
    answers: Option<&Answers>,
    python: &PythonChoice,
) {
    let mach = b.mach;
    let matches = table.matching_name(word);
    let on_path = mach.which(word);
    let module_origin = answers.and_then(|a| a.specs.get(word).cloned().flatten());
    if argv.is_empty() && !matches.is_empty() {
        b.t.kind = TargetKind::Service;
        let pids: Vec<u32> = matches.iter().map(|p| p.pid).collect();
        let roots = table.roots(&pids);
        b.evidence(format!(
            "{} running process{} match `{word}` by name or command line",
            pids.len(),
            if pids.len() == 1 { "" } else { "es" }
        ));
        if let Some(p) = &on_path {
            b.evidence(format!(
                "`{word}` is also a program ({}); to start a new one instead, give its arguments or its path",
                p.display()
            ));
        }
        let unit = match mach.systemd_unit(word).await {
            Ok(u) => u,
            Err(why) => {
                b.evidence(why);
                None
            }
        };
        // A systemd unit's main PID settles which instance is meant.
        let chosen_roots: Vec<u32> = match &unit {
            Some(u) if u.main_pid != 0 && roots.contains(&u.main_pid) => {
                b.evidence(format!(
                    "systemd unit {} has main PID {}",
                    u.unit, u.main_pid
                ));
                vec![u.main_pid]
            }
            _ => roots.clone(),
        };
        let mut processes = Vec::new();
        for root in &chosen_roots {
            for pid in table.tree(*root) {
                if let Some(s) = table.get(pid) {
                    let mut info = table.info(mach, s);
                    info.role = Some(if pid == *root {
                        "main".into()
                    } else if pids.contains(&pid) {
                        "worker".into()
                    } else {
                        "child".into()
                    });
                    processes.push(info);
                }
            }
        }
        if chosen_roots.len() > 1 {
            let listed: Vec<String> = chosen_roots
                .iter()
                .filter_map(|r| processes.iter().find(|p| p.pid == *r))
                .map(|p| {
                    let kids = p.children.len();
                    format!(
                        "{} (`{}`{})",
                        p.pid,
                        short_cmdline(p),
                        if kids > 0 {
                            format!(", {kids} children")
                        } else {
                            String::new()
                        }
                    )
                })
                .collect();
            b.ask(format!(
                "{} separate processes match '{word}': {}. Which one (a PID), or all of them?",
                chosen_roots.len(),
                listed.join(", ")
            ));
        }
        b.t.summary = if chosen_roots.len() == 1 {
            format!("service `{word}`: {}", describe_processes(&processes))
        } else {
            format!("service `{word}`: {} candidates", chosen_roots.len())
        };
        b.t.service = Some(ServiceMatch {
            name: word.to_string(),
            matched_pids: pids,
            roots: chosen_roots,
            systemd_unit: unit,
        });
        // The service's own interpreter (its venv), not the one a new program would get.
        b.t.python =
            processes
                .iter()
                .find(|p| p.is_python)
                .map(|p| match venv_of_process(mach, p) {
                    Some(_) => process_python(mach, p),
                    None => python.clone(),
                });
        b.t.processes = processes;
        return;
    }
    if let Some(path) = on_path {
        set_program(b, word, Some(path), argv, &[], python);
        return;
    }
    if let Some(origin) = module_origin {
        b.t.kind = TargetKind::PythonModule;
        b.evidence(format!(
            "`{word}` is no program or running process; as a Python module it resolves to {origin}"
        ));
        let mut command = vec![
            python
                .executable
                .clone()
                .unwrap_or(python.requested.clone()),
            "-m".into(),
            word.to_string(),
        ];
        command.extend(argv.iter().cloned());
        b.t.summary = format!("Python module `{word}`");
        b.t.command = Some(command);
        b.t.module = Some(ModuleTarget {
            name: word.to_string(),
            origin: Some(origin),
            argv: argv.to_vec(),
        });
        b.t.python = Some(python.clone());
        return;
    }
    b.t.unrecognized.insert(0, word.to_string());
}

pub(super) fn resolve_pids(b: &mut Build<'_>, pids: &[u32], table: &Table, has_main: bool) {
    let mach = b.mach;
    let mut found = Vec::new();
    for pid in pids {
        match table.get(*pid) {
            Some(snap) => {
                let mut info = table.info(mach, snap);
                info.role = Some("target".into());
                b.evidence(format!(
                    "PID {pid} is alive: `{}` (user {}, up {:.0} s{})",
                    short_cmdline(&info),
                    info.user.clone().unwrap_or_else(|| info.uid.to_string()),
                    info.elapsed_s,
                    match (&info.python_version, info.is_python) {
                        (Some(v), _) => format!(", Python {v}"),
                        (None, true) => ", Python".into(),
                        _ => String::new(),
                    }
                ));
                found.push(info);
                // Its children come with it.
                for child in table.tree(*pid).into_iter().skip(1) {
                    if let Some(s) = table.get(child) {
                        let mut c = table.info(mach, s);
                        c.role = Some("child".into());
                        found.push(c);
                    }
                }
            }
            None if *pid == std::process::id() => b.ask(format!(
                "PID {pid} is this profiling server itself. Which process should I profile?"
            )),
            None => {
                let python_now: Vec<String> = table
                    .processes
                    .iter()
                    .filter(|p| p.cmdline.first().is_some_and(|a| is_python_interpreter(a)))
                    .take(5)
                    .map(|p| format!("{} (`{}`)", p.pid, p.cmdline.join(" ")))
                    .collect();
                let hint = if python_now.is_empty() {
                    String::new()
                } else {
                    format!(" Running Python processes: {}.", python_now.join(", "))
                };
                b.ask(format!(
                    "No process {pid} is running. Which process should I profile?{hint}"
                ));
            }
        }
    }
    if found.is_empty() {
        return;
    }
    if has_main {
        b.evidence(
            "a PID and another target were both named: the PID's processes are kept with it",
        );
        b.t.processes.extend(found);
        return;
    }
    b.t.kind = TargetKind::Process;
    let mains: Vec<&ProcessInfo> = found
        .iter()
        .filter(|p| p.role.as_deref() == Some("target"))
        .collect();
    b.t.summary = match mains.as_slice() {
        [p] => format!(
            "process {} `{}`{}",
            p.pid,
            short_cmdline(p),
            if p.children.is_empty() {
                String::new()
            } else {
                format!(" with {} children", p.children.len())
            }
        ),
        many => format!(
            "processes {}",
            many.iter()
                .map(|p| p.pid.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    if found.iter().any(|p| p.is_python) {
        let main = found.iter().find(|p| p.is_python).cloned();
        b.t.python = main.as_ref().map(|p| process_python(mach, p));
    }
    b.t.processes = found;
}
