//! `memory_profiler` on one function: resident memory per line.

use super::line_profiler::function_of;
use crate::*;

/// Runs the target under memory_profiler with only the named function traced: a global trace
/// hook adds that function's code to memory_profiler's map the first time it is called (it is
/// defined by the target, so it cannot be named before the target runs) and hands its frames
/// to memory_profiler's own tracer; every other frame is left untraced. Writes the per-line
/// table as JSON. argv: out.json, file, qualname, then the target (`script args` or
/// `-m module args`).
pub(crate) const MEMPROF_RUNNER: &str = r#"
import json, linecache, os, runpy, sys, threading
out, target, qualname = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
rest = sys.argv[4:]
try:
    from memory_profiler import LineProfiler
except ImportError:
    sys.stderr.write("No module named memory_profiler\n")
    sys.exit(97)
prof = LineProfiler(backend="psutil")
prof._original_trace_function = None
def tracer(frame, event, arg):
    code = frame.f_code
    if event == "call" and code not in prof.code_map:
        if getattr(code, "co_qualname", code.co_name) == qualname and os.path.realpath(code.co_filename) == target:
            prof.code_map.add(code)
    if code in prof.code_map:
        return prof.trace_memory_usage(frame, event, arg)
    return None
def write():
    sys.settrace(None)
    rows = []
    for filename, lines in prof.code_map.items():
        for lineno, m in lines:
            rows.append({
                "line": lineno,
                "source": linecache.getline(filename, lineno).rstrip("\n"),
                "occurrences": m[2] if m else 0,
                "mem_usage_mib": m[1] if m else None,
                "increment_mib": m[0] if m else None,
            })
        break
    with open(out, "w") as f:
        json.dump({"file": target, "function": qualname, "lines": rows}, f)
threading.settrace(tracer)
sys.settrace(tracer)
try:
    if rest[:1] == ["-m"]:
        sys.argv = [rest[1]] + rest[2:]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        sys.path.insert(0, os.path.dirname(os.path.realpath(rest[0])))
        runpy.run_path(rest[0], run_name="__main__")
finally:
    write()
"#;

/// Per-line memory of the function `options.function` names, through memory_profiler.
pub(crate) async fn memory_profiler(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let (file, qualname) = function_of(input)?;
    let (interpreter, script) = split_python(input)?;
    let python = interpreter[0].clone();
    let rows = artifact_path(input, place, ArtifactKind::MemoryProfilerJson);
    let file_path = place.cwd.join(file);
    let mut argv = interpreter;
    argv.extend([
        "-c".into(),
        MEMPROF_RUNNER.into(),
        rows.to_string_lossy().into_owned(),
        file_path.to_string_lossy().into_owned(),
        qualname.to_string(),
    ]);
    argv.extend(script);
    let outcome = launch(input, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if module_missing(&mut e, "memory_profiler", "memory_profiler", &python) {
        return Ok(e);
    }
    if rows.exists() {
        let parsed = system_profile_parse::memory_profile::parse(&read(&rows));
        e.warnings
            .extend(parsed.diagnostics.iter().map(|d| d.message.clone()));
        if parsed.value.lines.is_empty() {
            e.warnings
                .push(format!("`{qualname}` never ran, or is not in {file}"));
        }
        e.metrics.memory_lines = Some(parsed.value);
        e.artifacts
            .extend(file_artifact(rows, ArtifactKind::MemoryProfilerJson));
    }
    explain_exit(&mut e);
    Ok(e)
}
