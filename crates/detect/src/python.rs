//! The target's Python: one interpreter process imports every Python-side profiler and reports
//! sys facts; a second, in parallel, imports torch (slow) when it is installed.

use crate::catalog::{catalog, Locate};
use serde::Deserialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use system_profile_exec::{CommandSpec, ExitKind};
use system_profile_model::detect::{PythonEnv, TorchInfo};

/// What the module probe printed for one module.
#[derive(Debug, Clone, Deserialize)]
pub struct ModuleResult {
    pub ok: bool,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SysReport {
    executable: String,
    version: String,
    implementation: String,
    in_venv: bool,
    modules: HashMap<String, ModuleResult>,
}

#[derive(Debug, Deserialize)]
struct TorchReport {
    present: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    torch: Option<TorchInfo>,
}

pub struct PythonProbe {
    pub env: PythonEnv,
    pub modules: HashMap<String, ModuleResult>,
    pub modules_ms: f64,
    pub torch_ms: f64,
    pub diagnostics: Vec<String>,
    /// What timed out twice.
    pub timed_out: Vec<String>,
}

/// Every Python-side profiler imported, torch kept out: Scalene imports torch where it can
/// (2.1 s of its 2.7 s here), none of them needs it to load, and the torch probe reads torch.
const SYS_SCRIPT: &str = r#"
import sys, json, platform, importlib
sys.modules["torch"] = None
mods = {}
for spec in sys.argv[1:]:
    name, _, dist = spec.partition("=")
    try:
        m = importlib.import_module(name)
        v = getattr(m, "__version__", None)
        if v is None and dist:
            try:
                from importlib.metadata import version
                v = version(dist)
            except Exception:
                pass
        mods[name] = {"ok": True, "version": None if v is None else str(v), "path": getattr(m, "__file__", None)}
    except BaseException as e:
        mods[name] = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
print(json.dumps({"executable": sys.executable, "version": platform.python_version(),
                  "implementation": platform.python_implementation(),
                  "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix), "modules": mods}))
"#;

/// torch's facts. Importing torch takes seconds (2.5 s of a 4 s program's pipeline here), and
/// without an NVIDIA device node CUDA cannot be available to it: then its own files say the
/// rest (`torch/version.py`, the NCCL wheel beside it), and it is imported only where a GPU is.
const TORCH_SCRIPT: &str = r#"
import json, importlib.util, glob, os
spec = importlib.util.find_spec("torch")
if spec is None:
    print(json.dumps({"present": False, "error": "torch is not installed in this environment"}))
elif not (glob.glob("/dev/nvidia[0-9]*") or glob.glob("/proc/driver/nvidia/gpus/*")):
    try:
        root = os.path.dirname(spec.origin)
        facts = {}
        with open(os.path.join(root, "version.py")) as f:
            exec(compile(f.read(), "torch/version.py", "exec"), facts)
        info = {"version": str(facts["__version__"]), "cuda_available": False,
                "cuda_version": facts.get("cuda"), "device_count": 0,
                "distributed_available": os.path.isdir(os.path.join(root, "distributed"))}
        if facts.get("cuda"):
            from importlib.metadata import distributions
            for d in distributions():
                if (d.metadata["Name"] or "").lower().startswith("nvidia-nccl"):
                    info["nccl_version"] = d.version
        print(json.dumps({"present": True, "torch": info}))
    except BaseException as e:
        print(json.dumps({"present": True, "error": "%s: %s" % (type(e).__name__, e)}))
else:
    try:
        import torch
        cuda = bool(torch.cuda.is_available())
        info = {"version": str(torch.__version__), "cuda_available": cuda,
                "cuda_version": torch.version.cuda, "device_count": torch.cuda.device_count() if cuda else 0,
                "distributed_available": bool(torch.distributed.is_available())}
        try:
            v = torch.cuda.nccl.version()
            info["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:
            pass
        print(json.dumps({"present": True, "torch": info}))
    except BaseException as e:
        print(json.dumps({"present": True, "error": "%s: %s" % (type(e).__name__, e)}))
"#;

fn failure(
    outcome: &Result<system_profile_exec::Outcome, system_profile_exec::ExecError>,
) -> String {
    match outcome {
        Err(e) => e.to_string(),
        Ok(o) if o.exit == ExitKind::TimedOut => {
            format!("timed out after {:.1} s", o.wall.as_secs_f64())
        }
        Ok(o) => {
            let err = o.stderr.text();
            let last = err.lines().last().unwrap_or("").trim();
            format!("exited with {:?}: {last}", o.exit)
        }
    }
}

pub async fn probe(python: &str, timeout: Duration) -> PythonProbe {
    let module_args: Vec<String> = catalog()
        .iter()
        .filter_map(|t| match t.locate {
            Locate::PythonModule { module, dist } => {
                Some(format!("{module}={}", dist.unwrap_or("")))
            }
            _ => None,
        })
        .collect();
    let mut sys_argv = vec![python.to_string(), "-c".into(), SYS_SCRIPT.into()];
    sys_argv.extend(module_args);
    let sys_spec = CommandSpec::new(sys_argv);
    let torch_spec = CommandSpec::new([python, "-c", TORCH_SCRIPT]);
    // torch takes seconds to import even on an idle machine.
    let torch_timeout = timeout * 4;

    let t0 = Instant::now();
    let sys_fut = async {
        let r = crate::run_patiently(&sys_spec, timeout).await;
        (r, t0.elapsed())
    };
    let torch_fut = async {
        let r = crate::run_patiently(&torch_spec, torch_timeout).await;
        (r, t0.elapsed())
    };
    let (((sys_out, sys_late), sys_wall), ((torch_out, torch_late), torch_wall)) =
        tokio::join!(sys_fut, torch_fut);
    let mut timed_out = Vec::new();

    let mut diagnostics = Vec::new();
    let mut env = PythonEnv {
        requested: python.to_string(),
        available: false,
        executable: None,
        version: None,
        implementation: None,
        in_venv: false,
        torch: None,
        torch_reason: None,
        reason: None,
    };
    let mut modules = HashMap::new();
    let parsed: Option<SysReport> = match &sys_out {
        Ok(o) if o.exit.success() => serde_json::from_str(o.stdout.text().trim()).ok(),
        _ => None,
    };
    match parsed {
        Some(report) => {
            env.available = true;
            env.executable = Some(report.executable);
            env.version = Some(report.version);
            env.implementation = Some(report.implementation);
            env.in_venv = report.in_venv;
            modules = report.modules;
        }
        None if sys_late => {
            let what = format!("the Python probe of '{python}'");
            env.reason = Some(crate::not_known_yet(&what, timeout));
            timed_out.push(what);
        }
        None => {
            let why = failure(&sys_out);
            env.reason = Some(format!(
                "the Python interpreter '{python}' could not be run ({why}); pass `python` with the interpreter the target uses"
            ));
        }
    }

    if env.available {
        let torch: Option<TorchReport> = match &torch_out {
            Ok(o) if o.exit.success() => serde_json::from_str(o.stdout.text().trim()).ok(),
            _ => None,
        };
        match torch {
            Some(TorchReport {
                torch: Some(info), ..
            }) => env.torch = Some(info),
            Some(TorchReport { present, error, .. }) => {
                env.torch_reason = error;
                if present {
                    diagnostics.push("torch is installed but failed to import".into());
                }
            }
            None if torch_late => {
                let what = "the torch probe".to_string();
                env.torch_reason = Some(crate::not_known_yet(&what, torch_timeout));
                timed_out.push(what);
            }
            None => {
                let why = failure(&torch_out);
                diagnostics.push(format!("torch probe: {why}"));
                env.torch_reason = Some(format!("torch probe failed: {why}"));
            }
        }
    }

    PythonProbe {
        env,
        modules,
        modules_ms: sys_wall.as_secs_f64() * 1e3,
        torch_ms: torch_wall.as_secs_f64() * 1e3,
        diagnostics,
        timed_out,
    }
}
