//! Step 1: the user's free text → a target resolved against this machine. Nothing is guessed:
//! what cannot be resolved to one thing becomes a question.

mod cluster;
mod frameworks;
mod launcher;
pub mod machine;
mod python;
mod reading;
mod resolve;
#[cfg(test)]
mod tests;

use crate::procinfo::Table;
use crate::pyhelper::{Answers, Questions};
use crate::recipe::Recipes;
use crate::words::{
    focus_of_word, is_filler, normalize, option_of_word, read_non_ascii, split_args, split_scripts,
};
use cluster::*;
use frameworks::*;
use launcher::*;
pub use machine::{FileKind, Live, Machine};
use python::*;
pub use reading::pid_without_a_pid;
use reading::*;
use resolve::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use system_profile_model::options::AskedOption;
use system_profile_model::recipe::{Recipe, RecipeRole};
use system_profile_model::target::{
    CodeLocation, CommandTarget, ComponentMatch, Focus, FocusWord, FrameworkMatch, LauncherTarget,
    ModuleTarget, ProcessInfo, PythonChoice, PythonOutline, ScriptTarget, ServiceMatch, Target,
    TargetKind,
};
use system_profile_sample::proc::ProcessSnapshot;

/// How to identify.
#[derive(Debug, Clone)]
pub struct IdentifyOptions {
    /// Absolute directory relative paths are resolved in.
    pub cwd: PathBuf,
    /// The interpreter the caller named, if any.
    pub python: Option<String>,
    /// The interpreter used when nothing else decides.
    pub default_python: String,
    /// Limit for the interpreter's answers (syntax trees, module lookup).
    pub helper_timeout: Duration,
}

/// What the first target word turned out to be, before resolution.
#[derive(Debug, Clone)]
enum Main {
    Script {
        path: PathBuf,
        interpreter: Option<String>,
    },
    Module {
        name: String,
        interpreter: Option<String>,
    },
    /// A program given by path, or `python -c`.
    Program {
        argv0: String,
        path: Option<PathBuf>,
    },
    Function {
        file: Option<PathBuf>,
        module: Option<String>,
        spec: FunctionSpec,
        raw: String,
    },
    /// A bare word: a service, a program on PATH, a module or nothing; decided with the
    /// process table and the interpreter.
    Word(String),
    /// A distributed launcher and its entry point (its arguments follow as argv).
    Launcher(LauncherTarget),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SlurmWords {
    /// A job's id, or a step's (`1234.0`).
    Id(String),
    Name(String),
    Mine,
}

#[derive(Debug, Clone)]
enum FunctionSpec {
    Qualname(String),
    Lines(u32, u32),
}

impl Main {
    /// Words after it are its argv.
    fn takes_argv(&self) -> bool {
        !matches!(self, Main::Function { .. })
    }
}

/// The target under construction.
struct Build<'m> {
    t: Target,
    /// Where facts come from.
    mach: &'m dyn Machine,
}

impl Build<'_> {
    fn evidence(&mut self, s: impl Into<String>) {
        self.t.evidence.push(s.into());
    }

    fn ask(&mut self, q: impl Into<String>) {
        self.t.needs_clarification = true;
        self.t.questions.push(q.into());
    }

    /// A word that asks for a profiler switch (`idle`): kept once, and said.
    fn asked(&mut self, word: &str, asked: AskedOption) {
        if !self.t.asked_options.contains(&asked) {
            self.t.asked_options.push(asked);
            self.evidence(format!(
                "`{word}` asks for the profilers' `{}` switch: set on every step whose method reads it",
                asked.option().wire_name()
            ));
        }
    }

    fn focus(&mut self, word: &str, focus: Focus) {
        if !self.t.focus.contains(&focus) {
            self.t.focus.push(focus);
        }
        self.t.focus_words.push(FocusWord {
            word: word.to_string(),
            focus,
        });
    }
}

/// The scan of the words: the main target, its argv, PIDs, focus, framework phrases.
#[derive(Default)]
struct Reading {
    main: Option<Main>,
    argv: Vec<String>,
    pids: Vec<u32>,
    /// Local TCP ports whose listening process is the target.
    ports: Vec<u16>,
    /// (phrase, recipe id).
    frameworks: Vec<(String, String)>,
    /// A Slurm job named: by id (`slurm job 1234`, `slurm 1234.0`), by name, or none (the
    /// user's running job).
    slurm: Option<SlurmWords>,
    /// A Ray job named (`ray job 02000000`), or the whole cluster (`ray cluster`: "").
    ray: Option<String>,
    unrecognized: Vec<String>,
}

/// The words of what the user typed: shell-like splitting after full-width folding, Japanese
/// split where its script changes (no spaces between its words) unless the whole token is a
/// path that `exists`, blank words dropped (as a name one would match every process). Pure but
/// for `exists`; a quoting problem comes back to be said.
fn lex(arguments: &str, exists: impl Fn(&str) -> bool) -> (Vec<String>, Option<String>) {
    let (raw, quote_problem) = split_args(&normalize(arguments));
    let mut words: Vec<String> = Vec::new();
    for token in raw {
        if token.is_ascii() || exists(&token) {
            words.push(token);
        } else {
            words.extend(split_scripts(&token));
        }
    }
    words.retain(|w| !w.trim().is_empty());
    (words, quote_problem)
}

/// Identify the target named by `arguments` on this machine. Never fails: what cannot be
/// resolved is asked.
pub async fn identify(arguments: &str, opts: &IdentifyOptions, recipes: &Recipes) -> Target {
    identify_on(&Live, arguments, opts, recipes).await
}

/// Identify on `m`: every fact about the machine comes from it.
pub async fn identify_on(
    mach: &dyn Machine,
    arguments: &str,
    opts: &IdentifyOptions,
    recipes: &Recipes,
) -> Target {
    let mut b = Build {
        mach,
        t: Target {
            target_id: None,
            arguments: arguments.to_string(),
            kind: TargetKind::Unknown,
            focus: Vec::new(),
            focus_words: Vec::new(),
            asked_options: Vec::new(),
            needs_clarification: false,
            questions: Vec::new(),
            summary: String::new(),
            cwd: opts.cwd.to_string_lossy().into_owned(),
            command: None,
            python: None,
            script: None,
            module: None,
            program: None,
            function: None,
            service: None,
            framework: None,
            launcher: None,
            cluster: None,
            processes: Vec::new(),
            evidence: Vec::new(),
            unrecognized: Vec::new(),
        },
    };
    let (words, quote_problem) = lex(arguments, |token| {
        mach.exists(&resolve_path(mach, &opts.cwd, token))
    });
    if let Some(p) = quote_problem {
        b.evidence(p);
    }
    let reading = read_words(&mut b, &words, recipes, &opts.cwd);
    b.t.unrecognized = reading.unrecognized.clone();
    if let Some(words) = &reading.slurm {
        resolve_slurm(&mut b, words).await;
        return close(b);
    }
    if let Some(job) = &reading.ray {
        resolve_ray(&mut b, job).await;
        return close(b);
    }
    if spans_a_cluster(&mut b, &reading, recipes).await {
        return close(b);
    }
    let table = mach.processes();

    // The interpreter and what it can tell: one start for all questions.
    let (explicit_interp, script_path): (Option<&str>, Option<PathBuf>) = match &reading.main {
        Some(Main::Script { path, interpreter }) => (interpreter.as_deref(), Some(path.clone())),
        Some(Main::Module { interpreter, .. }) => (interpreter.as_deref(), None),
        Some(Main::Function { file, .. }) => (None, file.clone()),
        Some(Main::Launcher(l)) if l.entry[0] != "-m" => {
            (None, Some(resolve_path(mach, &opts.cwd, &l.entry[0])))
        }
        _ => (None, None),
    };
    let (python, because) = choose_python(mach, opts, explicit_interp, script_path.as_deref());
    let mut q = Questions {
        versions: recipes
            .frameworks()
            .filter_map(|r| r.package.clone())
            .collect(),
        ..Default::default()
    };
    let program_py_arg: Option<PathBuf> = match &reading.main {
        Some(Main::Program { .. }) | Some(Main::Word(_)) => reading
            .argv
            .iter()
            .map(|a| resolve_path(mach, &opts.cwd, a))
            .find(|p| p.extension().is_some_and(|e| e == "py") && mach.is_file(p)),
        _ => None,
    };
    match &reading.main {
        Some(Main::Script { path, .. }) => {
            let file = if mach.is_dir(path) {
                path.join("__main__.py")
            } else {
                path.clone()
            };
            q.outline.push(file.to_string_lossy().into_owned());
        }
        Some(Main::Module { name, .. }) => q.find_spec.push(name.clone()),
        Some(Main::Function { file: Some(f), .. }) => {
            q.outline.push(f.to_string_lossy().into_owned())
        }
        Some(Main::Function {
            module: Some(m), ..
        }) => q.find_spec.push(m.clone()),
        Some(Main::Word(w)) => q.find_spec.push(w.clone()),
        Some(Main::Launcher(l)) => match l.entry.as_slice() {
            [m, name, ..] if m == "-m" => q.find_spec.push(name.clone()),
            [script, ..] => q.outline.push(
                resolve_path(mach, &opts.cwd, script)
                    .to_string_lossy()
                    .into_owned(),
            ),
            [] => {}
        },
        _ => {}
    }
    if let Some(p) = &program_py_arg {
        q.outline.push(p.to_string_lossy().into_owned());
    }
    // Only focus words (or nothing): no file, module, process or framework to ask Python about.
    let nothing_to_ask = reading.main.is_none()
        && reading.frameworks.is_empty()
        && reading.pids.is_empty()
        && reading.ports.is_empty();
    let mut answers = if nothing_to_ask {
        None
    } else {
        match mach
            .ask_python(&python, &opts.cwd, &q, opts.helper_timeout)
            .await
        {
            Ok(a) => Some(a),
            Err(e) => {
                b.evidence(format!("the interpreter could not be asked: {e}"));
                None
            }
        }
    };
    // A function named through its module: outline the file the module resolves to.
    if let (
        Some(Main::Function {
            module: Some(m), ..
        }),
        Some(a),
    ) = (&reading.main, &answers)
    {
        if let Some(Some(origin)) = a.specs.get(m) {
            let more = Questions {
                outline: vec![origin.clone()],
                ..Default::default()
            };
            if let Ok(extra) = mach
                .ask_python(&python, &opts.cwd, &more, opts.helper_timeout)
                .await
            {
                if let Some(a) = answers.as_mut() {
                    a.outlines.extend(extra.outlines);
                }
            }
        }
    }
    let python_choice = PythonChoice {
        requested: python.clone(),
        executable: answers.as_ref().map(|a| a.executable.clone()),
        version: answers.as_ref().map(|a| a.version.clone()),
        chosen_because: because,
    };
    let outline_of = |p: &Path| -> Option<PythonOutline> {
        answers
            .as_ref()
            .and_then(|a| a.outlines.get(p.to_string_lossy().as_ref()).cloned())
    };

    match reading.main.clone() {
        Some(Main::Script { path, .. }) => {
            let file = if mach.is_dir(&path) {
                path.join("__main__.py")
            } else {
                path.clone()
            };
            let outline = outline_of(&file);
            b.t.kind = TargetKind::PythonScript;
            b.evidence(format!("{} exists", path.display()));
            if answers.is_none() {
                b.ask(format!(
                    "The interpreter `{python}` did not run. Which Python should run {}?",
                    path.display()
                ));
            }
            if let Some(err) = outline.as_ref().and_then(|o| o.error.as_ref()) {
                b.evidence(format!("{} does not parse: {err}", file.display()));
            }
            let mut command = vec![
                python_choice.executable.clone().unwrap_or(python.clone()),
                path.to_string_lossy().into_owned(),
            ];
            command.extend(reading.argv.iter().cloned());
            b.t.summary = format!(
                "Python script {} run by {}{}",
                path.display(),
                command[0],
                if reading.argv.is_empty() {
                    String::new()
                } else {
                    format!(" with arguments {:?}", reading.argv)
                }
            );
            b.t.command = Some(command);
            b.t.script = Some(ScriptTarget {
                path: path.to_string_lossy().into_owned(),
                argv: reading.argv.clone(),
                outline,
            });
            b.t.python = Some(python_choice.clone());
        }
        Some(Main::Module { name, .. }) => {
            b.t.kind = TargetKind::PythonModule;
            let origin = answers
                .as_ref()
                .and_then(|a| a.specs.get(&name).cloned().flatten());
            match &origin {
                Some(o) => b.evidence(format!("module `{name}` resolves to {o}")),
                None if answers.is_some() => b.ask(format!(
                    "Module `{name}` is not importable by {python} (run from {}). Is another interpreter or directory needed?",
                    opts.cwd.display()
                )),
                None => b.ask(format!(
                    "The interpreter `{python}` did not run. Which Python has module `{name}`?"
                )),
            }
            let mut command = vec![
                python_choice.executable.clone().unwrap_or(python.clone()),
                "-m".into(),
                name.clone(),
            ];
            command.extend(reading.argv.iter().cloned());
            b.t.summary = format!("Python module `{name}` run by {}", command[0]);
            b.t.command = Some(command);
            b.t.module = Some(ModuleTarget {
                name,
                origin,
                argv: reading.argv.clone(),
            });
            b.t.python = Some(python_choice.clone());
        }
        Some(Main::Program { argv0, path }) => {
            set_program(&mut b, &argv0, path, &reading.argv, &words, &python_choice);
        }
        Some(Main::Launcher(l)) => {
            set_launched(
                &mut b,
                l,
                &reading.argv,
                &opts.cwd,
                answers.as_ref(),
                &outline_of,
                &python_choice,
            );
        }
        Some(Main::Function {
            file,
            module,
            spec,
            raw,
        }) => {
            b.t.kind = TargetKind::Function;
            b.t.python = Some(python_choice.clone());
            let file = file.or_else(|| {
                module.as_ref().and_then(|m| {
                    answers
                        .as_ref()
                        .and_then(|a| a.specs.get(m).cloned().flatten())
                        .map(PathBuf::from)
                })
            });
            resolve_function(
                &mut b,
                &raw,
                file,
                module,
                spec,
                &outline_of,
                &python_choice,
            );
        }
        Some(Main::Word(word)) => {
            resolve_word(
                &mut b,
                &word,
                &reading.argv,
                &table,
                answers.as_ref(),
                &python_choice,
            )
            .await;
        }
        None => {}
    }

    // Ports name the processes listening on them.
    let mut pids = reading.pids.clone();
    for port in &reading.ports {
        let inodes = mach.listening_inodes(*port);
        let owners: Vec<u32> = table
            .processes
            .iter()
            .filter(|p| mach.socket_inodes(p.pid).iter().any(|i| inodes.contains(i)))
            .map(|p| p.pid)
            .collect();
        // Pre-fork servers share the socket with their workers: the parent is the one to name.
        let owners = table.roots(&owners);
        if owners.is_empty() {
            b.ask(if inodes.is_empty() {
                format!("Nothing on this machine listens on port {port}. Is the server running, or is it on another port?")
            } else {
                format!("Port {port} is open, but its process is not readable by this server (another user's?). Which PID is it?")
            });
        } else {
            b.evidence(format!(
                "port {port} is listened on by {}",
                owners
                    .iter()
                    .map(|p| format!("PID {p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            for owner in owners {
                if !pids.contains(&owner) {
                    pids.push(owner);
                }
            }
        }
    }
    if !pids.is_empty() {
        resolve_pids(&mut b, &pids, &table, reading.main.is_some());
    }
    // Frameworks named by words, or recognised from the code, program or processes.
    let named = reading.frameworks.first().cloned();
    let launch = b.t.command.clone();
    if let Some((_, id)) = &named {
        if let Some(recipe) = recipes.get(id) {
            let words: Vec<String> = reading.frameworks.iter().map(|(p, _)| p.clone()).collect();
            let (mut m, procs) = framework_match(
                mach,
                recipe,
                &table,
                words,
                answers.as_ref(),
                launch.as_deref(),
            );
            // A running framework's interpreter is its processes' (their venv's), not the
            // server's default: its package, its version and the profilers beside it are there.
            if b.t.kind == TargetKind::Unknown && explicit_interp.is_none() {
                if let Some(choice) =
                    running_python(mach, &procs, &table, opts, recipe.package.as_deref()).await
                {
                    if let (Some(p), Some(v)) = (&recipe.package, &choice.1) {
                        m.package = Some(p.clone());
                        m.package_version = Some(v.clone());
                    }
                    b.t.python = Some(choice.0);
                }
            }
            if b.t.kind == TargetKind::Unknown {
                b.t.kind = TargetKind::Framework;
                name_framework(&mut b, recipe, m, procs, &table, &opts.cwd);
            } else {
                b.evidence(format!(
                    "`{}` names {}",
                    reading.frameworks[0].0, recipe.name
                ));
                b.t.framework = Some(m);
            }
        }
    } else if b.t.framework.is_none()
        && matches!(
            b.t.kind,
            TargetKind::PythonScript
                | TargetKind::PythonModule
                | TargetKind::Function
                | TargetKind::Command
                | TargetKind::Process
                | TargetKind::Service
        )
    {
        let outline =
            b.t.script
                .as_ref()
                .and_then(|s| s.outline.clone())
                .or_else(|| b.t.function.as_ref().and_then(|f| f.outline.clone()));
        let program =
            b.t.program
                .as_ref()
                .and_then(|p| p.argv.first().cloned())
                .or_else(|| b.t.launcher.as_ref().map(|l| l.program.clone()));
        let by_process = || {
            b.t.processes.iter().find_map(|p| {
                recipes.frameworks().find(|r| {
                    table
                        .components(r)
                        .iter()
                        .any(|(_, pids)| pids.contains(&p.pid))
                })
            })
        };
        let selected =
            select_framework(recipes, outline.as_ref(), program.as_deref()).or_else(|| {
                by_process().map(|r| (r, format!("its processes match {}'s components", r.name)))
            });
        if let Some((recipe, why)) = selected {
            let (m, _) = framework_match(
                mach,
                recipe,
                &table,
                Vec::new(),
                answers.as_ref(),
                launch.as_deref(),
            );
            b.evidence(format!("{} recognised: {why}", recipe.name));
            b.t.framework = Some(m);
        }
    }

    // A running launcher among the processes found (by PID, name or framework).
    if b.t.launcher.is_none() {
        if let Some(l) = running_launcher(mach, &b.t.processes, &table) {
            let agents: Vec<String> = l.agents.iter().map(|p| p.to_string()).collect();
            let nodes = {
                let mut n: Vec<u32> = l.ranks.iter().filter_map(|r| r.ids.node_rank).collect();
                n.sort_unstable();
                n.dedup();
                n
            };
            b.evidence(format!(
                "PID {} {} `{}` with {} rank(s) running{}",
                agents.join(", "),
                if agents.len() > 1 {
                    "are distributed launchers (one per node here):"
                } else {
                    "is a distributed launcher:"
                },
                l.program,
                l.ranks.len(),
                if nodes.len() > 1 {
                    format!(
                        " on nodes {}",
                        nodes
                            .iter()
                            .map(|n| n.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    String::new()
                }
            ));
            b.t.launcher = Some(l);
        }
    }

    // Focus only: the whole machine.
    if b.t.kind == TargetKind::Unknown && !b.t.focus.is_empty() && !b.t.needs_clarification {
        b.t.kind = TargetKind::Focus;
        let names: Vec<&str> = b.t.focus.iter().map(|f| f.as_str()).collect();
        b.t.summary = format!("the whole machine, focused on {}", names.join(", "));
        b.evidence(
            "no program, process or framework was named: the plan observes the whole machine",
        );
    }

    if b.t.kind == TargetKind::Unknown && !b.t.needs_clarification {
        if words.is_empty() {
            let mut q = String::from("What should I profile? A script (`train.py`), a module (`-m pkg.mod`), a command, a PID (`pid 4121`), a service name, a function (`app.py:Trainer.step` or `app.py:120-180`), a framework (`vllm serving`, `torch training`), or a focus (`gpu`, `memory`, `interconnect`, `cpu`, `io`).");
            let here = python_files(mach, &opts.cwd, 6);
            if !here.is_empty() {
                q.push_str(&format!(" Python files here: {}.", here.join(", ")));
            }
            let pys = users_python_processes(&table.processes, mach.uid());
            if !pys.is_empty() {
                q.push_str(&format!(" Running Python processes: {}.", pys.join(", ")));
            }
            b.ask(q);
        } else {
            let what = if b.t.unrecognized.is_empty() {
                arguments.trim().to_string()
            } else {
                b.t.unrecognized.join(" ")
            };
            b.ask(format!(
                "`{what}` is not a file here, a running process, a program on PATH, an importable module or a framework I know ({}). What should I profile?",
                recipes.frameworks().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    close(b)
}

/// The last words of a target: what was ignored, and a summary for one left unresolved.
fn close(mut b: Build) -> Target {
    if !b.t.unrecognized.is_empty() && b.t.kind != TargetKind::Unknown {
        let words = b.t.unrecognized.join(" ");
        b.evidence(format!("ignored words not understood: {words}"));
    }
    if b.t.needs_clarification && b.t.summary.is_empty() {
        b.t.summary = "not resolved: see questions".into();
    }
    b.t
}

/// Up to five running Python processes of user `uid`, as `pid (`cmdline`)`: the ones a
/// question can offer (another user's cannot be profiled without privileges, and their
/// command lines are theirs).
fn users_python_processes(processes: &[ProcessSnapshot], uid: u32) -> Vec<String> {
    processes
        .iter()
        .filter(|p| p.uid == uid)
        .filter(|p| p.cmdline.first().is_some_and(|a| is_python_interpreter(a)))
        .take(5)
        .map(|p| format!("{} (`{}`)", p.pid, p.cmdline.join(" ")))
        .collect()
}

#[cfg(test)]
mod users_tests {
    use super::*;

    #[test]
    fn lexing_splits_japanese_unless_it_is_a_path_and_drops_blank_words() {
        let nothing_exists = |_: &str| false;
        let (words, problem) = lex("train.pyのメモリ ''", nothing_exists);
        assert!(problem.is_none());
        assert_eq!(
            words[0], "train.py",
            "split where the script changes: {words:?}"
        );
        assert!(words.len() >= 2, "{words:?}");
        assert!(words.iter().all(|w| !w.trim().is_empty()), "{words:?}");
        let (words, _) = lex("データ.py", |t| t == "データ.py");
        assert_eq!(
            words,
            vec!["データ.py".to_string()],
            "a path that exists stays whole"
        );
        let (_, problem) = lex("'unclosed", nothing_exists);
        assert!(problem.is_some());
    }

    fn process(pid: u32, uid: u32, argv: &[&str]) -> ProcessSnapshot {
        ProcessSnapshot {
            pid,
            uid,
            cmdline: argv.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_users_own_python_processes_are_offered() {
        let table = [
            process(10, 1000, &["python3", "mine.py"]),
            process(11, 0, &["python3", "roots.py"]),
            process(12, 1000, &["bash"]),
            process(13, 1001, &["/usr/bin/python3.11", "theirs.py"]),
        ];
        assert_eq!(
            users_python_processes(&table, 1000),
            vec!["10 (`python3 mine.py`)".to_string()]
        );
        assert_eq!(
            users_python_processes(&table, 0),
            vec!["11 (`python3 roots.py`)".to_string()]
        );
    }
}
