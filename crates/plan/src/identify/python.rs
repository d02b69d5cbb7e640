//! Which interpreter a target runs with: named, a venv beside it, its shebang, a running process's own (its venv when it runs in one), or the default.

use super::*;

pub(super) fn shebang_interpreter(mach: &dyn Machine, path: &Path) -> Option<String> {
    let head = mach.read_head(path, 256)?;
    let text = String::from_utf8_lossy(&head);
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

/// A virtual environment's interpreter beside `dir` (`.venv`, `venv`, `env`).
pub(super) fn venv_python(mach: &dyn Machine, dir: &Path) -> Option<PathBuf> {
    [".venv", "venv", "env"]
        .iter()
        .map(|v| dir.join(v).join("bin/python"))
        .find(|p| mach.is_file(p))
}

/// The interpreter a running Python process uses, as the profilers must start it: the
/// virtual environment's when the process runs in one (its modules are there), else its exe.
/// `/proc/<pid>/exe` resolves a venv's `bin/python` symlink to the base interpreter, which
/// sees none of the venv's packages; the venv is found from, in order, the process's argv[0]
/// (a `bin/python` beside a `pyvenv.cfg`), its `VIRTUAL_ENV`, and the `site-packages` of
/// the libraries it mapped.
pub(super) fn process_python(mach: &dyn Machine, p: &ProcessInfo) -> PythonChoice {
    let found = venv_of_process(mach, p);
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
pub(super) fn venv_of_process(mach: &dyn Machine, p: &ProcessInfo) -> Option<(String, String)> {
    let venv_python = |root: &Path| -> Option<String> {
        let py = root.join("bin/python");
        (mach.is_file(&root.join("pyvenv.cfg")) && mach.exists(&py))
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
    if let Some(v) = mach.environ(p.pid).get("VIRTUAL_ENV") {
        if let Some(py) = venv_python(Path::new(v)) {
            return Some((py, format!("VIRTUAL_ENV={v}")));
        }
    }
    for path in mach.mapped_files(p.pid) {
        let path = path.to_string_lossy();
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
pub(super) fn choose_python(
    mach: &dyn Machine,
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
        if let Some(v) = venv_python(mach, dir) {
            return (
                v.to_string_lossy().into_owned(),
                format!("the virtual environment in {}", dir.display()),
            );
        }
    }
    if let Some(i) = script
        .filter(|s| mach.is_file(s))
        .and_then(|s| shebang_interpreter(mach, s))
    {
        return (i, "the script's shebang".into());
    }
    (
        opts.default_python.clone(),
        "the server's default interpreter".into(),
    )
}

/// The interpreter of a running framework's first Python root process, with `package`'s
/// version as that interpreter sees it; `None` where no root runs Python.
pub(super) async fn running_python(
    mach: &dyn Machine,
    procs: &[ProcessInfo],
    table: &crate::procinfo::Table,
    opts: &IdentifyOptions,
    package: Option<&str>,
) -> Option<(PythonChoice, Option<String>)> {
    let pids: Vec<u32> = procs.iter().map(|p| p.pid).collect();
    let roots = table.roots(&pids);
    let root = procs
        .iter()
        .find(|p| roots.contains(&p.pid) && p.is_python)?;
    let mut choice = process_python(mach, root);
    let q = Questions {
        versions: package.iter().map(|p| p.to_string()).collect(),
        ..Default::default()
    };
    let mut version = None;
    if let Ok(a) = mach
        .ask_python(&choice.requested, &opts.cwd, &q, opts.helper_timeout)
        .await
    {
        choice.executable = Some(a.executable.clone());
        choice.version = Some(a.version.clone());
        version = package.and_then(|p| a.versions.get(p).cloned().flatten());
    }
    Some((choice, version))
}
