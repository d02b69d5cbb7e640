//! `strace_c`: the syscall table of a command or a PID.

use crate::*;

/// `strace -c` of a started command, or of a PID for the window (strace detaches on SIGTERM
/// and writes its table).
pub(crate) async fn strace_c(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let table = artifact_path(input, place, ArtifactKind::StraceC);
    let mut argv: Vec<String> = vec!["strace".into(), "-c".into()];
    if input.options.subprocesses != Some(false) {
        argv.push("-f".into());
    }
    argv.extend(["-o".into(), table.to_string_lossy().into_owned()]);
    let attach = matches!(input.target, RunTarget::Pid { .. });
    let timeout = match &input.target {
        RunTarget::Pid { pid } => {
            argv.extend(["-p".into(), pid.to_string()]);
            Some(window(input))
        }
        _ => {
            argv.push("--".into());
            argv.extend(command_of(input)?);
            timeout_of(input)
        }
    };
    let outcome = launch(input, place, &argv, timeout, |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    if attach && e.status == RunStatus::TimedOut {
        // The window ended: strace was told to detach, which is how an attach run ends.
        e.status = RunStatus::Completed;
    }
    if attach && e.stderr_tail.contains("Operation not permitted") {
        e.status = RunStatus::Failed;
        e.error = Some("strace may not attach here: run as root, set kernel.yama.ptrace_scope=0, or in a container add --cap-add=SYS_PTRACE".into());
    }
    let parsed = system_profile_parse::strace_c::parse(&read(&table));
    e.warnings.extend(
        parsed
            .diagnostics
            .iter()
            .map(|d| format!("strace -c: {}", d.message)),
    );
    e.metrics.syscalls = Some(parsed.value);
    e.artifacts.extend(file_artifact(table, ArtifactKind::StraceC));
    if e.error.is_none() {
        explain_exit(&mut e);
    }
    Ok(e)
}
