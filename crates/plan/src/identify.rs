//! Step 1: the user's free text → a target resolved against this machine. Nothing is guessed:
//! what cannot be resolved to one thing becomes a question.

use crate::procinfo::Table;
use crate::pyhelper::{self, Answers, Questions};
use crate::recipe::Recipes;
use crate::words::{
    focus_of_word, is_filler, normalize, read_non_ascii, split_args, split_scripts,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use system_profile_model::recipe::{Recipe, RecipeRole};
use system_profile_model::target::{
    CodeLocation, CommandTarget, ComponentMatch, Focus, FocusWord, FrameworkMatch, ModuleTarget,
    ProcessInfo, PythonChoice, PythonOutline, ScriptTarget, ServiceMatch, SystemdUnit, Target,
    TargetKind,
};

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
struct Build {
    t: Target,
}

impl Build {
    fn evidence(&mut self, s: impl Into<String>) {
        self.t.evidence.push(s.into());
    }

    fn ask(&mut self, q: impl Into<String>) {
        self.t.needs_clarification = true;
        self.t.questions.push(q.into());
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

fn is_python_interpreter(word: &str) -> bool {
    let name = word.rsplit('/').next().unwrap_or(word);
    name == "python"
        || name == "python3"
        || name == "pypy3"
        || crate::procinfo::python_version_of_name(name).is_some()
}

fn looks_like_path(word: &str) -> bool {
    word.contains('/')
        || word.starts_with('.')
        || word.starts_with('~')
        || [".py", ".sh", ".pyw", ".ipynb"]
            .iter()
            .any(|ext| word.ends_with(ext))
}

fn expand_home(word: &str) -> String {
    match (word.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{home}/{rest}"),
        _ => word.to_string(),
    }
}

/// `word` against `cwd`, with `.` components dropped (`./tool` → `<cwd>/tool`); `..` is
/// kept, as a symlinked directory makes it mean something else than its lexical parent.
fn resolve_path(cwd: &Path, word: &str) -> PathBuf {
    let p = PathBuf::from(expand_home(word));
    let joined = if p.is_absolute() { p } else { cwd.join(p) };
    joined
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// A PID given as `pid 4121`, `pid:4121`, `PID=4121`, `--pid 4121`, `-p 4121` or `4121`;
/// returns the PID and how many words it used.
fn read_pid(words: &[String]) -> Option<(u32, usize)> {
    let w = words.first()?.to_lowercase();
    let next = || words.get(1).and_then(|n| n.parse::<u32>().ok());
    if let Ok(pid) = w.parse::<u32>() {
        return Some((pid, 1));
    }
    for prefix in ["pid:", "pid=", "--pid=", "pid"] {
        if let Some(rest) = w.strip_prefix(prefix) {
            if let Ok(pid) = rest.parse::<u32>() {
                return Some((pid, 1));
            }
        }
    }
    if matches!(w.as_str(), "pid" | "--pid" | "-p" | "process" | "プロセス") {
        return next().map(|pid| (pid, 2));
    }
    None
}

/// A local TCP port given as `http://localhost:8000/v1`, `127.0.0.1:8000`, `:8000`,
/// `port 8000` or `--port=8000`; returns the port (or the remote host it names) and how many
/// words it used.
fn read_port(words: &[String]) -> Option<(Result<u16, String>, usize)> {
    let w = words.first()?.to_lowercase();
    if matches!(w.as_str(), "port" | "--port" | "ポート") {
        let port = words.get(1)?.parse().ok()?;
        return Some((Ok(port), 2));
    }
    if let Some(rest) = w
        .strip_prefix("port=")
        .or_else(|| w.strip_prefix("--port="))
    {
        return Some((Ok(rest.parse().ok()?), 1));
    }
    let rest = w
        .strip_prefix("http://")
        .or_else(|| w.strip_prefix("https://"))
        .unwrap_or(&w);
    let authority = rest.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let local = host.is_empty()
        || host == "localhost"
        || host.starts_with("127.")
        || host == "0.0.0.0"
        || host == "::1"
        || host == "::";
    let is_url = rest.len() != w.len();
    if local {
        Some((Ok(port), 1))
    } else if is_url || host.chars().all(|c| c.is_ascii_digit() || c == '.') {
        Some((Err(host.to_string()), 1))
    } else {
        None
    }
}

/// `file.py:func`, `file.py:120-180`, `file.py:120`, `pkg.mod:Class.method`.
fn read_function(cwd: &Path, word: &str) -> Option<Main> {
    if word.contains("://") {
        return None;
    }
    let (left, right) = word.rsplit_once(':')?;
    if left.is_empty() || right.is_empty() {
        return None;
    }
    let spec = if let Some((a, b)) = right.split_once('-') {
        FunctionSpec::Lines(a.trim().parse().ok()?, b.trim().parse().ok()?)
    } else if let Ok(n) = right.parse::<u32>() {
        FunctionSpec::Lines(n, n)
    } else if right
        .split('.')
        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
    {
        FunctionSpec::Qualname(right.to_string())
    } else {
        return None;
    };
    let path = resolve_path(cwd, left);
    if left.ends_with(".py") || path.is_file() {
        return Some(Main::Function {
            file: Some(path),
            module: None,
            spec,
            raw: word.to_string(),
        });
    }
    let dotted = left
        .split('.')
        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'));
    dotted.then(|| Main::Function {
        file: None,
        module: Some(left.to_string()),
        spec,
        raw: word.to_string(),
    })
}

fn has_python_shebang(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 128];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let line = String::from_utf8_lossy(&head[..n]);
    line.starts_with("#!") && line.lines().next().is_some_and(|l| l.contains("python"))
}

fn shebang_interpreter(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let first = text.lines().next()?.strip_prefix("#!")?.trim();
    let mut parts = first.split_whitespace();
    let prog = parts.next()?;
    let interp = if prog.ends_with("/env") {
        parts.find(|p| !p.starts_with('-'))?
    } else {
        prog
    };
    is_python_interpreter(interp).then(|| interp.to_string())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Python files of `dir`, sorted, at most `n`.
fn python_files(dir: &Path, n: usize) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|f| f.ends_with(".py"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files.truncate(n);
    files
}

/// Names in the path's directory that are close to its file name.
fn close_matches(path: &Path) -> Vec<String> {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut scored: Vec<(f64, String)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .map(|f| (strsim::jaro_winkler(&name, &f), f))
                .filter(|(s, _)| *s > 0.8)
                .collect()
        })
        .unwrap_or_default();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(3).map(|(_, f)| f).collect()
}

/// Classify the word at the start of `words` as a target; returns it and the words used, or
/// a question.
fn read_main(cwd: &Path, words: &[String]) -> Result<(Main, usize), String> {
    let w = &words[0];
    if is_python_interpreter(w) {
        let mut i = 1;
        while let Some(a) = words.get(i) {
            match a.as_str() {
                "-m" => {
                    let name = words.get(i + 1).ok_or("`-m` needs a module name")?;
                    return Ok((
                        Main::Module {
                            name: name.clone(),
                            interpreter: Some(w.clone()),
                        },
                        i + 2,
                    ));
                }
                "-c" => {
                    return Ok((
                        Main::Program {
                            argv0: w.clone(),
                            path: None,
                        },
                        1,
                    ))
                }
                "-X" | "-W" => i += 2,
                s if s.starts_with('-') => i += 1,
                s => {
                    let path = resolve_path(cwd, s);
                    if !path.exists() {
                        return Err(missing_path(&path, s));
                    }
                    return Ok((
                        Main::Script {
                            path,
                            interpreter: Some(w.clone()),
                        },
                        i + 1,
                    ));
                }
            }
        }
        return Err(format!(
            "`{w}` alone starts an interactive interpreter. Which script or module should it run?"
        ));
    }
    if w == "-m" {
        let name = words
            .get(1)
            .ok_or("`-m` needs a module name (`-m pkg.mod`)")?;
        return Ok((
            Main::Module {
                name: name.clone(),
                interpreter: None,
            },
            2,
        ));
    }
    if let Some(f) = read_function(cwd, w) {
        return Ok((f, 1));
    }
    let path = resolve_path(cwd, w);
    // A folder named alone (focus words aside) is that folder: never `python -m` of it, nor
    // a process name.
    let alone_dir = path.is_dir() && words[1..].iter().all(|x| !focus_of_word(x).is_empty());
    if path.exists() && (looks_like_path(w) || path.is_file() || alone_dir) {
        if path.is_dir() {
            if path.join("__main__.py").is_file() {
                return Ok((
                    Main::Script {
                        path,
                        interpreter: None,
                    },
                    1,
                ));
            }
            let files = python_files(&path, 8);
            return Err(if files.is_empty() {
                format!(
                    "{} is a directory with no Python files. What should run?",
                    path.display()
                )
            } else {
                format!(
                    "{} is a directory. Which script should run: {}?",
                    path.display(),
                    files.join(", ")
                )
            });
        }
        if w.ends_with(".py") || w.ends_with(".pyw") || has_python_shebang(&path) {
            return Ok((
                Main::Script {
                    path,
                    interpreter: None,
                },
                1,
            ));
        }
        if is_executable(&path) {
            return Ok((
                Main::Program {
                    argv0: w.clone(),
                    path: Some(path),
                },
                1,
            ));
        }
        return Err(format!(
            "{} is neither a Python file nor an executable program. What should run it?",
            path.display()
        ));
    }
    if looks_like_path(w) {
        return Err(missing_path(&path, w));
    }
    Ok((Main::Word(w.clone()), 1))
}

fn missing_path(path: &Path, word: &str) -> String {
    let close = close_matches(path);
    let dir = path.parent().unwrap_or(Path::new("/"));
    if close.is_empty() {
        format!(
            "`{word}` does not exist ({} was checked). Which file did you mean?",
            path.display()
        )
    } else {
        format!(
            "`{word}` does not exist ({} was checked). Did you mean {} (in {})?",
            path.display(),
            close.join(" or "),
            dir.display()
        )
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
    unrecognized: Vec<String>,
}

fn read_words(b: &mut Build, words: &[String], recipes: &Recipes, cwd: &Path) -> Reading {
    let phrases = recipes.phrases();
    let non_ascii_phrases: Vec<&str> = phrases.iter().map(|(p, _)| *p).collect();
    let mut r = Reading::default();
    let mut after_dashes = false;
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if !w.is_ascii() && !resolve_path(cwd, w).exists() {
            let reading = read_non_ascii(w, &non_ascii_phrases);
            for (word, f) in reading.focus {
                b.focus(&word, f);
            }
            for p in reading.phrases {
                if let Some((_, id)) = phrases.iter().find(|(ph, _)| *ph == p) {
                    r.frameworks.push((p.clone(), id.to_string()));
                }
            }
            if !reading.leftover.is_empty() {
                if let Some((pid, _)) = read_pid(&["プロセス".into(), reading.leftover.clone()])
                {
                    r.pids.push(pid);
                } else {
                    r.unrecognized.push(reading.leftover);
                }
            }
            i += 1;
            continue;
        }
        let launchable = r.main.as_ref().is_some_and(Main::takes_argv);
        if launchable {
            if after_dashes {
                r.argv.push(w.clone());
            } else if w == "--" {
                after_dashes = true;
            } else {
                // A focus word right after `--flag` is that flag's value.
                let prev_is_flag = r
                    .argv
                    .last()
                    .is_some_and(|p| p.starts_with('-') && !p.contains('='));
                let focus = focus_of_word(w);
                if !focus.is_empty() && !prev_is_flag {
                    for f in focus {
                        b.focus(w, f);
                    }
                    b.evidence(format!(
                        "`{w}` read as a focus word, not as an argument of the target (put arguments after `--` to pass it on)"
                    ));
                } else {
                    r.argv.push(w.clone());
                }
            }
            i += 1;
            continue;
        }
        if let Some((pid, used)) = read_pid(&words[i..]) {
            r.pids.push(pid);
            i += used;
            continue;
        }
        if let Some((port, used)) = read_port(&words[i..]) {
            match port {
                Ok(port) => r.ports.push(port),
                Err(host) => b.ask(format!(
                    "`{w}` is on another machine ({host}): profilers run where the process runs. Start the server there, or name a local port or process."
                )),
            }
            i += used;
            continue;
        }
        if !w.contains('/') {
            let focus = focus_of_word(w);
            if !focus.is_empty() {
                for f in focus {
                    b.focus(w, f);
                }
                i += 1;
                continue;
            }
            let lower: Vec<String> = words[i..].iter().map(|w| w.to_lowercase()).collect();
            if let Some((phrase, id)) = phrases.iter().find(|(p, _)| {
                let n = p.split(' ').count();
                p.is_ascii() && lower.len() >= n && lower[..n].join(" ") == *p
            }) {
                r.frameworks.push((phrase.to_string(), id.to_string()));
                i += phrase.split(' ').count();
                continue;
            }
            if is_filler(w) {
                i += 1;
                continue;
            }
        }
        if r.main.is_some() {
            r.unrecognized.push(w.clone());
            i += 1;
            continue;
        }
        match read_main(cwd, &words[i..]) {
            Ok((main, used)) => {
                r.main = Some(main);
                i += used;
            }
            Err(question) => {
                b.ask(question);
                r.unrecognized.push(w.clone());
                // The rest would be argv of the missing target; leave them unread.
                break;
            }
        }
    }
    r
}

/// A virtual environment's interpreter beside `dir` (`.venv`, `venv`, `env`).
fn venv_python(dir: &Path) -> Option<PathBuf> {
    [".venv", "venv", "env"]
        .iter()
        .map(|v| dir.join(v).join("bin/python"))
        .find(|p| p.is_file())
}

/// The interpreter a running Python process uses, as the profilers must start it: the
/// virtual environment's when the process runs in one (its modules are there), else its exe.
/// `/proc/<pid>/exe` resolves a venv's `bin/python` symlink to the base interpreter, which
/// sees none of the venv's packages; the venv is found from, in order, the process's argv[0]
/// (a `bin/python` beside a `pyvenv.cfg`), its `VIRTUAL_ENV`, and the `site-packages` of
/// the libraries it mapped.
fn process_python(p: &ProcessInfo) -> PythonChoice {
    let found = venv_of_process(p);
    let exe = p
        .exe
        .clone()
        .unwrap_or_else(|| p.cmdline.first().cloned().unwrap_or_default());
    match found {
        Some((python, why)) => PythonChoice {
            requested: python.clone(),
            executable: Some(python),
            version: p.python_version.clone(),
            chosen_because: format!("process {} runs in a virtual environment ({why})", p.pid),
        },
        None => PythonChoice {
            requested: exe.clone(),
            executable: p.exe.clone(),
            version: p.python_version.clone(),
            chosen_because: format!("process {} runs it", p.pid),
        },
    }
}

/// A venv's interpreter for a process, with how it was found.
fn venv_of_process(p: &ProcessInfo) -> Option<(String, String)> {
    let venv_python = |root: &Path| -> Option<String> {
        let py = root.join("bin/python");
        (root.join("pyvenv.cfg").is_file() && py.exists())
            .then(|| py.to_string_lossy().into_owned())
    };
    if let Some(argv0) = p.cmdline.first().filter(|a| a.contains('/')) {
        let path = match (Path::new(argv0).is_absolute(), &p.cwd) {
            (false, Some(cwd)) => Path::new(cwd).join(argv0),
            _ => PathBuf::from(argv0),
        };
        let root = path.parent().and_then(Path::parent);
        if let Some(py) = root.and_then(venv_python) {
            return Some((py, format!("argv[0] is {argv0}")));
        }
    }
    let environ = std::fs::read(format!("/proc/{}/environ", p.pid)).unwrap_or_default();
    for var in environ.split(|b| *b == 0) {
        if let Some(v) = var.strip_prefix(b"VIRTUAL_ENV=") {
            let v = String::from_utf8_lossy(v).into_owned();
            if let Some(py) = venv_python(Path::new(&v)) {
                return Some((py, format!("VIRTUAL_ENV={v}")));
            }
        }
    }
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", p.pid)).unwrap_or_default();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        if let Some(i) = path.find("/site-packages/") {
            // <root>/lib/pythonX.Y/site-packages/...
            let root = Path::new(&path[..i]).parent().and_then(Path::parent);
            if let Some(py) = root.and_then(venv_python) {
                return Some((py, format!("it loaded {path}")));
            }
        }
    }
    None
}

/// Which interpreter a Python target runs with.
fn choose_python(
    opts: &IdentifyOptions,
    explicit: Option<&str>,
    script: Option<&Path>,
) -> (String, String) {
    if let Some(p) = explicit {
        return (p.to_string(), "named on the command line".into());
    }
    if let Some(p) = &opts.python {
        return (p.clone(), "the `python` argument".into());
    }
    let script_dir = script.and_then(|s| s.parent());
    for dir in script_dir.into_iter().chain([opts.cwd.as_path()]) {
        if let Some(v) = venv_python(dir) {
            return (
                v.to_string_lossy().into_owned(),
                format!("the virtual environment in {}", dir.display()),
            );
        }
    }
    if let Some(i) = script.filter(|s| s.is_file()).and_then(shebang_interpreter) {
        return (i, "the script's shebang".into());
    }
    (
        opts.default_python.clone(),
        "the server's default interpreter".into(),
    )
}

/// The framework a script, command or process belongs to, by its imports, calls and program.
fn select_framework<'r>(
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

fn join_ticks(items: &[&String]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Read a recipe's facts from a command line: `--flag value`, `--flag=value`, `word value`.
fn read_facts(recipe: &Recipe, cmdline: &[String]) -> BTreeMap<String, String> {
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

fn short_cmdline(p: &ProcessInfo) -> String {
    let line = p.cmdline.join(" ");
    if line.chars().count() > 80 {
        format!("{}…", line.chars().take(79).collect::<String>())
    } else {
        line
    }
}

/// A framework's processes now: components, their processes (with roles) and its facts.
fn framework_match(
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
                    let mut info = table.info(snap);
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

/// `systemctl show` of `<name>.service`, when systemd runs this machine.
async fn systemd_unit(name: &str) -> Result<Option<SystemdUnit>, String> {
    if !Path::new("/run/systemd/system").is_dir() {
        return Err(
            "systemd is not running here (no /run/systemd/system): units not checked".into(),
        );
    }
    let Some(systemctl) = system_profile_exec::which("systemctl") else {
        return Err("systemctl is not on PATH: units not checked".into());
    };
    let unit = if name.contains('.') {
        name.to_string()
    } else {
        format!("{name}.service")
    };
    let spec = system_profile_exec::CommandSpec::new([
        systemctl.as_os_str(),
        "show".as_ref(),
        "--property=MainPID,ActiveState,LoadState".as_ref(),
        unit.as_ref(),
    ]);
    let out = system_profile_exec::run(
        &spec,
        &system_profile_exec::RunOptions::with_timeout(Duration::from_secs(3)),
    )
    .await
    .map_err(|e| format!("systemctl failed: {e}"))?;
    let text = out.stdout.text();
    let prop = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or("")
            .to_string()
    };
    if prop("LoadState") == "not-found" || prop("LoadState").is_empty() {
        return Ok(None);
    }
    Ok(Some(SystemdUnit {
        unit,
        active_state: prop("ActiveState"),
        main_pid: prop("MainPID").parse().unwrap_or(0),
    }))
}

fn describe_processes(processes: &[ProcessInfo]) -> String {
    processes
        .iter()
        .map(|p| match &p.role {
            Some(r) => format!("{} ({r})", p.pid),
            None => format!("{} (`{}`)", p.pid, short_cmdline(p)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Identify the target named by `arguments`. Never fails: what cannot be resolved is asked.
pub async fn identify(arguments: &str, opts: &IdentifyOptions, recipes: &Recipes) -> Target {
    let mut b = Build {
        t: Target {
            arguments: arguments.to_string(),
            kind: TargetKind::Unknown,
            focus: Vec::new(),
            focus_words: Vec::new(),
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
            processes: Vec::new(),
            evidence: Vec::new(),
            unrecognized: Vec::new(),
        },
    };
    let (raw, quote_problem) = split_args(&normalize(arguments));
    if let Some(p) = quote_problem {
        b.evidence(p);
    }
    // Japanese has no spaces between words: split a token where its script changes, unless
    // the whole token is a path that exists.
    let mut words: Vec<String> = Vec::new();
    for token in raw {
        if token.is_ascii() || resolve_path(&opts.cwd, &token).exists() {
            words.push(token);
        } else {
            words.extend(split_scripts(&token));
        }
    }
    // A blank word (`''`) names nothing; as a name it would match every process.
    words.retain(|w| !w.trim().is_empty());
    let reading = read_words(&mut b, &words, recipes, &opts.cwd);
    b.t.unrecognized = reading.unrecognized.clone();
    let table = Table::read();

    // The interpreter and what it can tell: one start for all questions.
    let (explicit_interp, script_path): (Option<&str>, Option<PathBuf>) = match &reading.main {
        Some(Main::Script { path, interpreter }) => (interpreter.as_deref(), Some(path.clone())),
        Some(Main::Module { interpreter, .. }) => (interpreter.as_deref(), None),
        Some(Main::Function { file, .. }) => (None, file.clone()),
        _ => (None, None),
    };
    let (python, because) = choose_python(opts, explicit_interp, script_path.as_deref());
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
            .map(|a| resolve_path(&opts.cwd, a))
            .find(|p| p.extension().is_some_and(|e| e == "py") && p.is_file()),
        _ => None,
    };
    match &reading.main {
        Some(Main::Script { path, .. }) => {
            let file = if path.is_dir() {
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
        match pyhelper::ask(&python, &opts.cwd, &q, opts.helper_timeout).await {
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
            if let Ok(extra) = pyhelper::ask(&python, &opts.cwd, &more, opts.helper_timeout).await {
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
            let file = if path.is_dir() {
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
        let inodes = system_profile_sample::proc::listening_inodes(*port);
        let owners: Vec<u32> = table
            .processes
            .iter()
            .filter(|p| {
                system_profile_sample::proc::socket_inodes(p.pid)
                    .iter()
                    .any(|i| inodes.contains(i))
            })
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
            let (m, procs) =
                framework_match(recipe, &table, words, answers.as_ref(), launch.as_deref());
            if b.t.kind == TargetKind::Unknown {
                b.t.kind = TargetKind::Framework;
                name_framework(&mut b, recipe, m, procs, &table);
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
        let program = b.t.program.as_ref().and_then(|p| p.argv.first().cloned());
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
            let here = python_files(&opts.cwd, 6);
            if !here.is_empty() {
                q.push_str(&format!(" Python files here: {}.", here.join(", ")));
            }
            let pys: Vec<String> = table
                .processes
                .iter()
                .filter(|p| p.uid == table.get(p.pid).map(|x| x.uid).unwrap_or(u32::MAX))
                .filter(|p| p.cmdline.first().is_some_and(|a| is_python_interpreter(a)))
                .take(5)
                .map(|p| format!("{} (`{}`)", p.pid, p.cmdline.join(" ")))
                .collect();
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
    if !b.t.unrecognized.is_empty() && b.t.kind != TargetKind::Unknown {
        let words = b.t.unrecognized.join(" ");
        b.evidence(format!("ignored words not understood: {words}"));
    }
    if b.t.needs_clarification && b.t.summary.is_empty() {
        b.t.summary = "not resolved: see questions".into();
    }
    b.t
}

fn set_program(
    b: &mut Build,
    argv0: &str,
    path: Option<PathBuf>,
    argv: &[String],
    words: &[String],
    python: &PythonChoice,
) {
    b.t.kind = TargetKind::Command;
    let is_python = is_python_interpreter(argv0) || path.as_deref().is_some_and(has_python_shebang);
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

fn resolve_function(
    b: &mut Build,
    raw: &str,
    file: Option<PathBuf>,
    module: Option<String>,
    spec: FunctionSpec,
    outline_of: &dyn Fn(&Path) -> Option<PythonOutline>,
    python: &PythonChoice,
) {
    let Some(file) = file else {
        b.ask(format!(
            "Module `{}` of `{raw}` is not importable by {}. Which file is it in?",
            module.unwrap_or_default(),
            python.requested
        ));
        return;
    };
    if !file.is_file() {
        let name = file.to_string_lossy().into_owned();
        b.ask(missing_path(&file, &name));
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

async fn resolve_word(
    b: &mut Build,
    word: &str,
    argv: &[String],
    table: &Table,
    answers: Option<&Answers>,
    python: &PythonChoice,
) {
    let matches = table.matching_name(word);
    let on_path = system_profile_exec::which(word);
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
        let unit = match systemd_unit(word).await {
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
                    let mut info = table.info(s);
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
        b.t.python = processes
            .iter()
            .find(|p| p.is_python)
            .map(|p| match venv_of_process(p) {
                Some(_) => process_python(p),
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

fn resolve_pids(b: &mut Build, pids: &[u32], table: &Table, has_main: bool) {
    let mut found = Vec::new();
    for pid in pids {
        match table.get(*pid) {
            Some(snap) => {
                let mut info = table.info(snap);
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
                        let mut c = table.info(s);
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
        b.t.python = main.as_ref().map(process_python);
    }
    b.t.processes = found;
}

fn name_framework(
    b: &mut Build,
    recipe: &Recipe,
    m: FrameworkMatch,
    procs: Vec<ProcessInfo>,
    table: &Table,
) {
    debug_assert_eq!(recipe.role, RecipeRole::Framework);
    let running: Vec<u32> = m.components.iter().flat_map(|c| c.pids.clone()).collect();
    match (&m.package, &m.package_version) {
        (Some(p), Some(v)) => b.evidence(format!("{p} {v} is installed")),
        (Some(p), None) => b.evidence(format!("{p} is not installed in the chosen interpreter")),
        _ => {}
    }
    if running.is_empty() {
        b.ask(format!(
            "No {} process is running now. Start it with one of: {} — which command should I run (or which PID, once it runs)?",
            recipe.name,
            recipe.entry_points.iter().map(|e| format!("`{e}`")).collect::<Vec<_>>().join(", ")
        ));
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
