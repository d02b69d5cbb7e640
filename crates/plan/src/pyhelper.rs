//! What only the target's own interpreter can say: `sys.executable` and version, a file's
//! syntax tree (definitions, their exact line ranges, what they call, what the file imports),
//! where a module resolves, and installed package versions. One interpreter start answers all
//! questions of one identification.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use system_profile_exec::{run, CommandSpec, ExitKind, RunOptions};
use system_profile_model::target::PythonOutline;

const HELPER: &str = r#"
import ast, json, sys, platform
req = json.loads(sys.argv[1])
out = {"executable": sys.executable, "version": platform.python_version(),
       "outlines": {}, "specs": {}, "versions": {}}

def called_name(node):
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return None

def calls_and_loops(nodes):
    calls, loop = set(), False
    for top in nodes:
        for n in ast.walk(top):
            if isinstance(n, ast.Call):
                name = called_name(n)
                if name:
                    calls.add(name)
            elif isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
                loop = True
    return sorted(calls), loop

def outline(path):
    with open(path, "rb") as f:
        src = f.read()
    tree = ast.parse(src, filename=path)
    imports, defs = set(), []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            imports.update(a.name.split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            imports.add(n.module.split(".")[0])
    def visit(body, prefix, in_class):
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = prefix + n.name
                start = min([n.lineno] + [d.lineno for d in n.decorator_list])
                if isinstance(n, ast.ClassDef):
                    kind = "class"
                else:
                    kind = ("async_" if isinstance(n, ast.AsyncFunctionDef) else "") + ("method" if in_class else "function")
                calls, loop = calls_and_loops(n.body)
                defs.append({"qualname": q, "def_kind": kind, "start_line": start, "def_line": n.lineno,
                             "end_line": n.end_lineno, "notable_calls": calls if kind != "class" else [],
                             "has_loop": loop})
                visit(n.body, q + ".", isinstance(n, ast.ClassDef))
            elif hasattr(n, "body") and isinstance(getattr(n, "body"), list):
                # if/try/with blocks at this level still hold definitions of this scope
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(n, field, []) or [], prefix, in_class)
    visit(tree.body, "", False)
    top = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    module_calls, _ = calls_and_loops(top)
    guard = any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)
    return {"lines": len(src.splitlines()), "imports": sorted(imports), "defs": defs,
            "module_level_calls": module_calls, "has_main_guard": guard}

for p in req.get("outline", []):
    try:
        out["outlines"][p] = outline(p)
    except SyntaxError as e:
        out["outlines"][p] = {"lines": 0, "imports": [], "defs": [], "has_main_guard": False,
                              "error": "syntax error at line %s: %s" % (e.lineno, e.msg)}
    except Exception as e:
        out["outlines"][p] = {"lines": 0, "imports": [], "defs": [], "has_main_guard": False,
                              "error": "%s: %s" % (type(e).__name__, e)}

import importlib.util
for name in req.get("find_spec", []):
    try:
        spec = importlib.util.find_spec(name)
        origin = None if spec is None else (spec.origin or (list(spec.submodule_search_locations or []) or [None])[0])
        out["specs"][name] = origin
    except Exception:
        out["specs"][name] = None

from importlib import metadata
for dist in req.get("versions", []):
    try:
        out["versions"][dist] = metadata.version(dist)
    except Exception:
        out["versions"][dist] = None
print(json.dumps(out))
"#;

/// What to ask the interpreter.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Questions {
    /// Absolute paths of Python files to outline.
    pub outline: Vec<String>,
    /// Module names to resolve.
    pub find_spec: Vec<String>,
    /// Distribution names whose installed version is wanted.
    pub versions: Vec<String>,
}

/// What the interpreter answered.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Answers {
    pub executable: String,
    pub version: String,
    #[serde(default)]
    pub outlines: BTreeMap<String, PythonOutline>,
    /// Module name → file it resolves to (`None`: not importable).
    #[serde(default)]
    pub specs: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub versions: BTreeMap<String, Option<String>>,
}

/// Why the interpreter could not answer.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HelperError(String);

/// How much longer the second try of a question that timed out may take.
const PATIENCE: u32 = 4;

/// Ask `python` the questions, within `timeout` (and once more within four times that).
/// Runs in `cwd` without isolation, so modules resolve as they would for the target (the
/// directory, PYTHONPATH, the venv's site-packages).
pub async fn ask(
    python: &str,
    cwd: &std::path::Path,
    q: &Questions,
    timeout: Duration,
) -> Result<Answers, HelperError> {
    let request = serde_json::to_string(q).map_err(|e| HelperError(e.to_string()))?;
    let spec = CommandSpec::new([python, "-c", HELPER, request.as_str()]).cwd(cwd);
    // A busy machine can make an interpreter start slowly: a timeout is tried once more with a
    // four times longer deadline (as detection's probes are) before it is an answer.
    let mut outcome = run(&spec, &RunOptions::with_timeout(timeout))
        .await
        .map_err(|e| HelperError(format!("could not start {python}: {e}")))?;
    let mut waited = timeout;
    if matches!(outcome.exit, ExitKind::TimedOut) {
        waited = timeout * PATIENCE;
        outcome = run(&spec, &RunOptions::with_timeout(waited))
            .await
            .map_err(|e| HelperError(format!("could not start {python}: {e}")))?;
    }
    let timeout = waited;
    match outcome.exit {
        // A sitecustomize may print; the answer is the last line.
        ExitKind::Exited { code: 0 } => {
            serde_json::from_str(outcome.stdout.text().trim().lines().last().unwrap_or(""))
                .map_err(|e| HelperError(format!("{python} gave an unreadable answer: {e}")))
        }
        ExitKind::TimedOut => Err(HelperError(format!(
            "{python} did not answer within {:.0} s (the machine may be busy: try again, or pass `python` if it is the wrong interpreter)",
            timeout.as_secs_f64()
        ))),
        other => Err(HelperError(format!(
            "{python} failed ({other:?}): {}",
            outcome.stderr.text().lines().last().unwrap_or("").trim()
        ))),
    }
}
