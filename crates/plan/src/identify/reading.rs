//! Reading the words: paths, PIDs, ports, functions, the script or program and its arguments, focus words.

use super::*;

pub(super) use system_profile_parse::launcher::is_python_interpreter;

pub(super) fn looks_like_path(word: &str) -> bool {
    word.contains('/')
        || word.starts_with('.')
        || word.starts_with('~')
        || [".py", ".sh", ".pyw", ".ipynb"]
            .iter()
            .any(|ext| word.ends_with(ext))
}

pub(super) fn expand_home(mach: &dyn Machine, word: &str) -> String {
    match (word.strip_prefix("~/"), mach.home()) {
        (Some(rest), Some(home)) => format!("{home}/{rest}"),
        _ => word.to_string(),
    }
}

/// `word` against `cwd`, with `.` components dropped (`./tool` → `<cwd>/tool`); `..` is
/// kept, as a symlinked directory makes it mean something else than its lexical parent.
pub(super) fn resolve_path(mach: &dyn Machine, cwd: &Path, word: &str) -> PathBuf {
    let p = PathBuf::from(expand_home(mach, word));
    let joined = if p.is_absolute() { p } else { cwd.join(p) };
    joined
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// What is wrong with a target that opens with `pid` not followed by a process id (`pid abc`,
/// `pid -5`, `pid 0`, a `pid` alone): a usage error, never a script, a module or a service of
/// that name. A `pid` later among the words may be a program's own argument.
pub fn pid_without_a_pid(words: &[String]) -> Option<String> {
    let at = 0;
    if !matches!(words.first()?.to_lowercase().as_str(), "pid" | "--pid") {
        return None;
    }
    let next = words.get(at + 1);
    match next.map(|n| n.parse::<u32>()) {
        Some(Ok(pid)) if pid > 0 => None,
        _ => Some(format!(
            "`{}` must be followed by a process id, a positive integer (`pid 4121`){}",
            words[at],
            next.map(|n| format!(": `{}` is not one", n.chars().take(40).collect::<String>()))
                .unwrap_or_else(|| ": none was given".into())
        )),
    }
}

/// A PID given as `pid 4121`, `pid:4121`, `PID=4121`, `--pid 4121`, `-p 4121` or `4121`;
/// returns the PID and how many words it used.
pub(super) fn read_pid(words: &[String]) -> Option<(u32, usize)> {
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
pub(super) fn read_port(words: &[String]) -> Option<(Result<u16, String>, usize)> {
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
pub(super) fn read_function(mach: &dyn Machine, cwd: &Path, word: &str) -> Option<Main> {
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
    let path = resolve_path(mach, cwd, left);
    if left.ends_with(".py") || mach.is_file(&path) {
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

pub(super) fn has_python_shebang(mach: &dyn Machine, path: &Path) -> bool {
    let head = mach.read_head(path, 128).unwrap_or_default();
    let line = String::from_utf8_lossy(&head);
    line.starts_with("#!") && line.lines().next().is_some_and(|l| l.contains("python"))
}

pub(super) fn is_executable(mach: &dyn Machine, path: &Path) -> bool {
    matches!(
        mach.kind(path),
        FileKind::File {
            executable: true,
            ..
        }
    )
}

/// Python files of `dir`, sorted, at most `n`.
pub(super) fn python_files(mach: &dyn Machine, dir: &Path, n: usize) -> Vec<String> {
    let mut files: Vec<String> = mach
        .list_dir(dir)
        .into_iter()
        .map(|(name, _)| name)
        .filter(|f| f.ends_with(".py"))
        .collect();
    files.sort();
    files.truncate(n);
    files
}

/// Names in the path's directory that are close to its file name.
pub(super) fn close_matches(mach: &dyn Machine, path: &Path) -> Vec<String> {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut scored: Vec<(f64, String)> = mach
        .list_dir(dir)
        .into_iter()
        .map(|(f, _)| (strsim::jaro_winkler(&name, &f), f))
        .filter(|(s, _)| *s > 0.8)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(3).map(|(_, f)| f).collect()
}

/// Classify the word at the start of `words` as a target; returns it and the words used, or
/// a question.
pub(super) fn read_main(
    mach: &dyn Machine,
    cwd: &Path,
    words: &[String],
) -> Result<(Main, usize), String> {
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
                    let path = resolve_path(mach, cwd, s);
                    if !mach.exists(&path) {
                        return Err(missing_path(mach, &path, s));
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
    if let Some(f) = read_function(mach, cwd, w) {
        return Ok((f, 1));
    }
    let path = resolve_path(mach, cwd, w);
    // A folder named alone (focus words aside) is that folder: never `python -m` of it, nor
    // a process name.
    let alone_dir = mach.is_dir(&path) && words[1..].iter().all(|x| !focus_of_word(x).is_empty());
    if mach.exists(&path) && (looks_like_path(w) || mach.is_file(&path) || alone_dir) {
        if mach.is_dir(&path) {
            if mach.is_file(&path.join("__main__.py")) {
                return Ok((
                    Main::Script {
                        path,
                        interpreter: None,
                    },
                    1,
                ));
            }
            let files = python_files(mach, &path, 8);
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
        if w.ends_with(".py") || w.ends_with(".pyw") || has_python_shebang(mach, &path) {
            return Ok((
                Main::Script {
                    path,
                    interpreter: None,
                },
                1,
            ));
        }
        if is_executable(mach, &path) {
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
        return Err(missing_path(mach, &path, w));
    }
    Ok((Main::Word(w.clone()), 1))
}

/// `slurm job 1234`, `slurm 1234.0` (a step), `slurm job train-ddp` (by name), `my slurm job`
/// or `slurm` alone (the user's running job); returns the words used.
pub(super) fn read_slurm(words: &[String]) -> Option<(SlurmWords, usize)> {
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let at = usize::from(lower.first().is_some_and(|w| w == "my"));
    if lower.get(at).map(String::as_str) != Some("slurm") {
        return None;
    }
    let mut used = at + 1;
    if lower.get(used).map(String::as_str) == Some("job") {
        used += 1;
    }
    let Some(next) = words.get(used).filter(|w| focus_of_word(w).is_empty()) else {
        return Some((SlurmWords::Mine, used));
    };
    let (id, step) = system_profile_cluster::job_and_step(next);
    let step_ok = step.is_none_or(|s| s.chars().all(|c| c.is_ascii_alphanumeric()));
    if !id.is_empty() && id.chars().all(|c| c.is_ascii_digit() || c == '_') && step_ok {
        let selector = match step {
            Some(step) => format!("{id}.{step}"),
            None => id.to_string(),
        };
        Some((SlurmWords::Id(selector), used + 1))
    } else {
        Some((SlurmWords::Name(next.clone()), used + 1))
    }
}

/// `ray cluster` (every live actor: "") or `ray job <id>`; returns the words used.
pub(super) fn read_ray(words: &[String]) -> Option<(String, usize)> {
    let lower: Vec<String> = words.iter().take(2).map(|w| w.to_lowercase()).collect();
    match lower.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["ray", "cluster"] => Some((String::new(), 2)),
        ["ray", "job"] => Some((words.get(2)?.clone(), 3)),
        _ => None,
    }
}

pub(super) fn missing_path(mach: &dyn Machine, path: &Path, word: &str) -> String {
    let close = close_matches(mach, path);
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

pub(super) fn read_words(
    b: &mut Build<'_>,
    words: &[String],
    recipes: &Recipes,
    cwd: &Path,
) -> Reading {
    let mach = b.mach;
    let phrases = recipes.phrases();
    let non_ascii_phrases: Vec<&str> = phrases.iter().map(|(p, _)| *p).collect();
    let mut r = Reading::default();
    let mut after_dashes = false;
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if !w.is_ascii() && !mach.exists(&resolve_path(mach, cwd, w)) {
            let reading = read_non_ascii(w, &non_ascii_phrases);
            for (word, f) in reading.focus {
                if let Some(a) = option_of_word(&word) {
                    b.asked(&word, a);
                }
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
                let asked = option_of_word(w);
                if (!focus.is_empty() || asked.is_some()) && !prev_is_flag {
                    for f in focus {
                        b.focus(w, f);
                    }
                    if let Some(a) = asked {
                        b.asked(w, a);
                    }
                    b.evidence(format!(
                        "`{w}` read as a focus word or a profiler switch, not as an argument of the target (put arguments after `--` to pass it on)"
                    ));
                } else {
                    r.argv.push(w.clone());
                }
            }
            i += 1;
            continue;
        }
        if r.main.is_none() && r.slurm.is_none() && r.ray.is_none() {
            if let Some((slurm, used)) = read_slurm(&words[i..]) {
                r.slurm = Some(slurm);
                i += used;
                continue;
            }
            if let Some((job, used)) = read_ray(&words[i..]) {
                r.ray = Some(job);
                i += used;
                continue;
            }
        }
        if r.main.is_none() {
            if let Some((launcher, used)) = read_launcher(&words[i..]) {
                r.main = Some(Main::Launcher(launcher));
                i += used;
                continue;
            }
        }
        if let Some(problem) = pid_without_a_pid(&words[i..(i + 2).min(words.len())]) {
            b.ask(format!("{problem}. Which process?"));
            i += 2;
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
            let asked = option_of_word(w);
            if !focus.is_empty() || asked.is_some() {
                for f in focus {
                    b.focus(w, f);
                }
                if let Some(a) = asked {
                    b.asked(w, a);
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
        match read_main(mach, cwd, &words[i..]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_pid_word_takes_a_positive_integer_or_is_a_usage_error() {
        assert_eq!(pid_without_a_pid(&words(&["pid", "4121"])), None);
        assert_eq!(pid_without_a_pid(&words(&["PID", "4121", "memory"])), None);
        for bad in [
            &["pid", "abc"][..],
            &["pid", "-5"],
            &["--pid", "0"],
            &["pid"],
        ] {
            let problem = pid_without_a_pid(&words(bad)).unwrap_or_else(|| panic!("{bad:?}"));
            assert!(problem.contains("positive integer"), "{problem}");
        }
        // A program's own `--pid` argument is the program's.
        assert_eq!(pid_without_a_pid(&words(&["train.py", "--pid", "x"])), None);
    }
}
