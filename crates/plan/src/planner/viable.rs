//! Whether a method can run here for this target and mode, and the first viable one of a step (the refused ones with why).

use super::*;

/// `0.13.1` ≥ `0.13`; non-numeric parts (`rc1`, `+cu128`) end the comparison.
pub(super) fn version_at_least(have: &str, want: &str) -> bool {
    let nums = |s: &str| -> Vec<u64> {
        s.split(['.', '+', '-'])
            .map_while(|p| p.parse::<u64>().ok())
            .collect()
    };
    let (h, w) = (nums(have), nums(want));
    for i in 0..w.len().max(h.len()) {
        let (a, b) = (
            h.get(i).copied().unwrap_or(0),
            w.get(i).copied().unwrap_or(0),
        );
        if a != b {
            return a > b;
        }
    }
    true
}

pub(super) fn refuse(reason: impl Into<String>, fix: Option<String>, fixable: bool) -> Refusal {
    Refusal {
        reason: reason.into(),
        fix,
        fixable,
    }
}

/// Can `method` run in `mode` against this target here?
pub(super) fn viable(ctx: &Context, method: Method, mode: TargetMode) -> Result<(), Refusal> {
    let spec = method.spec();
    if !spec.modes.contains(&mode) {
        let how = match mode {
            TargetMode::Launch => "start a program",
            TargetMode::Attach => "attach to a running process",
            TargetMode::Machine => "observe the whole machine",
            TargetMode::Cluster => "reach a cluster job's nodes",
        };
        return Err(refuse(format!("{} cannot {how}", method.id()), None, false));
    }
    if spec.python_only && !ctx.python {
        return Err(refuse(
            format!("{} reads Python; the target is not Python", method.id()),
            None,
            false,
        ));
    }
    if spec.needs_function
        && ctx
            .target
            .function
            .as_ref()
            .and_then(|f| f.qualname.as_ref())
            .is_none()
    {
        return Err(refuse(
            format!("{} needs a function to be named", method.id()),
            None,
            false,
        ));
    }
    if spec.needs_gpu && !ctx.gpu_present {
        return Err(refuse(
            format!("no NVIDIA GPU here{}", ctx.gpu_reason()),
            Some("run on a machine with an NVIDIA GPU and its driver".into()),
            true,
        ));
    }
    if spec.needs_torch && ctx.detect.python.torch.is_none() {
        return Err(refuse(
            format!(
                "torch is not importable by {}{}",
                ctx.detect.python.requested,
                ctx.detect
                    .python
                    .torch_reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
            Some("pip install torch (into the target's environment)".into()),
            true,
        ));
    }
    if let Some(tool_id) = spec.tool {
        match ctx.detect.tools.iter().find(|t| t.id == tool_id) {
            None => {
                return Err(refuse(
                    format!("{tool_id} was not checked by detect_tools"),
                    None,
                    true,
                ))
            }
            Some(t) if !t.usable => {
                return Err(refuse(
                    format!(
                        "{} is {}: {}",
                        t.name,
                        if t.available {
                            "not usable"
                        } else {
                            "not installed"
                        },
                        t.reason.clone().unwrap_or_else(|| "no reason given".into())
                    ),
                    t.install_hint.clone(),
                    true,
                ))
            }
            Some(_) => {}
        }
    }
    let ptrace = method.spec().attaches_by_ptrace;
    if mode == TargetMode::Attach && ptrace && !ctx.detect.permissions.can_attach_to_pid {
        return Err(refuse(
            format!(
                "attaching to a running process is refused here ({})",
                method.id()
            ),
            ctx.detect.permissions.attach_advice.clone(),
            true,
        ));
    }
    Ok(())
}

/// The first viable method of a step for `mode`; the refused ones before it.
pub(super) fn choose(
    ctx: &Context,
    step: &Step,
    modes: &[TargetMode],
) -> Result<(Method, TargetMode, Refused), Refused> {
    let mut refused = Vec::new();
    for m in &step.methods {
        let mut last = None;
        for mode in modes {
            match viable(ctx, *m, *mode) {
                Ok(()) => return Ok((*m, *mode, refused)),
                Err(r) => {
                    // Keep the most telling refusal: a fixable one over "does not fit".
                    if last.as_ref().is_none_or(|l: &Refusal| !l.fixable) {
                        last = Some(r);
                    }
                }
            }
        }
        if let Some(r) = last {
            refused.push((*m, r));
        }
    }
    Err(refused)
}
