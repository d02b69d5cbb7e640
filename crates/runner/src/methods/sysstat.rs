//! `vmstat`, `iostat`, `mpstat` and `pidstat` over a window.

use crate::*;

/// vmstat, iostat, mpstat or pidstat over the window, every `interval_s` (whole seconds).
pub(crate) async fn sysstat(
    input: &RunProfilerInput,
    place: &RunPlace,
) -> Result<Execution, RunError> {
    let method = input.profiler;
    let interval = input.options.interval_s.unwrap_or(1.0).round().max(1.0);
    let count = (window(input).as_secs_f64() / interval).ceil().max(1.0) as u64;
    let mut argv: Vec<String> = match method {
        Method::Vmstat => vec!["vmstat".into(), "-n".into(), "-w".into(), "-t".into()],
        Method::Iostat => ["iostat", "-d", "-x", "-y", "-o", "JSON"]
            .map(String::from)
            .to_vec(),
        Method::Mpstat => ["mpstat", "-P", "ALL", "-o", "JSON"]
            .map(String::from)
            .to_vec(),
        _ => ["pidstat", "-u", "-r", "-d", "-w", "-h"]
            .map(String::from)
            .to_vec(),
    };
    match (&input.target, method) {
        (RunTarget::System { .. }, _) => {}
        (RunTarget::Pid { pid }, Method::Pidstat) => argv.extend(["-p".into(), pid.to_string()]),
        _ => {
            return Err(RunError::new(
                RunErrorKind::BadTarget,
                format!(
                    "{} observes {} for duration_s: give target {{\"system\": true}}{}; to cover a command, run this in the background alongside it (plan_profile does)",
                    method.id(),
                    if method == Method::Pidstat { "processes" } else { "the machine" },
                    if method == Method::Pidstat { " or a pid" } else { "" }
                ),
            ))
        }
    }
    argv.extend([format!("{interval}"), count.to_string()]);
    // Times in 24-hour form whatever the locale, so every row parses the same way.
    let mut fixed = input.clone();
    fixed.env.insert("LC_ALL".into(), "C".into());
    let outcome = launch(&fixed, place, &argv, timeout_of(input), |_| {}).await?;
    let mut e = finish(&outcome, argv, place);
    let text = read(&place.dir.join("stdout.txt"));
    let parsed = match method {
        Method::Vmstat => system_profile_parse::sysstat::vmstat(&text),
        Method::Iostat => system_profile_parse::sysstat::iostat(&text),
        Method::Mpstat => system_profile_parse::sysstat::mpstat(&text),
        _ => system_profile_parse::sysstat::pidstat(&text),
    };
    e.warnings.extend(
        parsed
            .diagnostics
            .iter()
            .map(|d| format!("{}: {}", method.id(), d.message)),
    );
    if method == Method::Pidstat && parsed.value.series.is_empty() {
        e.warnings
            .push("pidstat reported no interval: the process ended within the first second".into());
    }
    e.metrics.sysstat = Some(parsed.value);
    explain_exit(&mut e);
    Ok(e)
}
