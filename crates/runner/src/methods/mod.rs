//! One module per method (or per family sharing one tool, like `nvidia-smi`'s). The registry
//! below is the one list that ties a [`Method`] to the function that runs it: adding a method
//! is its module and one line here. Everything else a method states (tool, options, artifacts)
//! is its `MethodSpec` in `model`.

use crate::*;

/// `cluster_nodes`' Ray half (its Slurm half and the shared tail are `cluster`).
mod ray;
/// The steps the step-windowing runners report.
mod steps;

/// The registry: `module { function => [methods it runs] }`. It writes the dispatch (a
/// `match` the compiler checks for every method), [`IMPLEMENTED`], and, for the tests, each
/// module's source beside its methods.
macro_rules! registry {
    ($($module:ident { $($run:ident => [$($method:ident),+]),+ $(,)? }),* $(,)?) => {
        $(mod $module;)*

        pub(crate) async fn dispatch(
            input: &RunProfilerInput,
            place: &RunPlace,
        ) -> Result<Execution, RunError> {
            match input.profiler {
                $($($(Method::$method)|+ => $module::$run(input, place).await,)+)*
            }
        }

        /// The methods this build runs.
        pub const IMPLEMENTED: &[Method] = &[$($($(Method::$method),+),+),*];

        /// Each module's methods and source, for the drift tests.
        #[cfg(test)]
        pub(crate) const MODULES: &[(&str, &[Method], &str)] = &[$((
            stringify!($module),
            &[$($(Method::$method),+),+],
            include_str!(concat!(stringify!($module), ".rs")),
        )),*];
    };
}

registry! {
    measure { time_v => [TimeV, Measure], procfs_sampler => [ProcfsSampler] },
    custom { custom => [Custom] },
    strace { strace_c => [StraceC] },
    perf { perf_stat => [PerfStat], perf_record => [PerfRecord] },
    py_spy { py_spy_record => [PySpyRecord], py_spy_dump => [PySpyDump] },
    cprofile { cprofile => [Cprofile] },
    line_profiler { line_profiler => [LineProfiler] },
    tracemalloc { tracemalloc => [Tracemalloc] },
    memray { memray => [Memray] },
    alloc_sample { alloc_sample => [AllocSample] },
    memory_profiler { memory_profiler => [MemoryProfiler] },
    sysstat { sysstat => [Vmstat, Iostat, Mpstat, Pidstat] },
    nvidia {
        nvml_sampler => [NvmlSampler],
        nvidia_smi => [NvidiaSmiDmon, NvidiaSmiQuery],
        nvidia_smi_topo => [NvidiaSmiTopo],
        nvlink_status => [NvlinkStatus],
    },
    nccl { nccl_debug => [NcclDebug] },
    nsys { nsys => [Nsys] },
    torch_profiler { torch_profiler => [TorchProfiler] },
    pyinstrument { pyinstrument => [Pyinstrument] },
    scalene { scalene => [Scalene] },
    cluster { cluster_nodes => [ClusterNodes] },
    serving { serving_window => [ServingWindow] },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use system_profile_model::run::OptionName;

    /// The artifact kinds a module's source names (`ArtifactKind::Folded`).
    fn kinds_named(source: &str) -> BTreeSet<ArtifactKind> {
        source
            .split("ArtifactKind::")
            .skip(1)
            .map(|rest| {
                let ident: String = rest
                    .chars()
                    .take_while(char::is_ascii_alphanumeric)
                    .collect();
                let mut wire = String::new();
                for c in ident.chars() {
                    if c.is_ascii_uppercase() && !wire.is_empty() {
                        wire.push('_');
                    }
                    wire.push(c.to_ascii_lowercase());
                }
                serde_json::from_value(serde_json::Value::String(wire)).unwrap()
            })
            .collect()
    }

    /// Every file a module records is one its methods' specs name (so the plan showed it), and
    /// every file a spec names is one the module records: the two cannot drift apart.
    #[test]
    fn modules_record_exactly_the_artifacts_their_specs_name() {
        // Every launched command's streams are kept by `finish`; `launch_sampled` keeps the
        // /proc timeline.
        let common = [ArtifactKind::Stdout, ArtifactKind::Stderr];
        for (module, methods, source) in MODULES {
            let named = kinds_named(source);
            let specified: BTreeSet<ArtifactKind> = methods
                .iter()
                .flat_map(|m| m.spec().artifacts.iter().map(|a| a.kind))
                .collect();
            let unspecified: Vec<_> = named.difference(&specified).collect();
            assert!(
                unspecified.is_empty(),
                "{module} records {unspecified:?}, which no spec of {methods:?} names"
            );
            let unrecorded: Vec<_> = specified
                .difference(&named)
                .filter(|k| !common.contains(k))
                .collect();
            assert!(
                unrecorded.is_empty(),
                "{module}: the specs of {methods:?} promise {unrecorded:?}, which it never records"
            );
        }
    }

    /// The options a module's source reads (`options.rate_hz`, `input\n.options\n.native`).
    fn options_read(source: &str) -> BTreeSet<String> {
        let compact: String = source.chars().filter(|c| !c.is_whitespace()).collect();
        compact
            .split("options.")
            .skip(1)
            .map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect::<String>()
            })
            .filter(|field| serde_json::from_value::<OptionName>(field.as_str().into()).is_ok())
            .collect()
    }

    /// The options a module reads are those its methods' specs list, which the planner keeps
    /// in a step and the schema names the readers of.
    #[test]
    fn modules_read_exactly_the_options_their_specs_list() {
        for (module, methods, source) in MODULES {
            let read = options_read(source);
            let listed: BTreeSet<String> = methods
                .iter()
                .flat_map(|m| m.spec().options.iter().map(system_profile_model::wire_name))
                .collect();
            assert_eq!(
                read, listed,
                "{module} ({methods:?}): read vs listed in the specs"
            );
        }
    }

    fn python(args: &[&str], cwd: &std::path::Path) -> std::process::Output {
        std::process::Command::new("python3")
            .args(args)
            .current_dir(cwd)
            .output()
            .unwrap()
    }

    /// Every Python source a method runs compiles under the interpreter the tests use.
    #[test]
    fn every_runner_script_compiles() {
        let dir = tempfile::tempdir().unwrap();
        for (name, code) in [
            ("cprofile_runner", cprofile::CPROFILE_RUNNER),
            ("pstats_to_json", cprofile::PSTATS_TO_JSON),
            ("lprof_to_json", line_profiler::LPROF_TO_JSON),
            ("memprof_runner", memory_profiler::MEMPROF_RUNNER),
            ("torch_runner", torch_profiler::TORCH_RUNNER),
            ("tracemalloc_runner", tracemalloc::TRACEMALLOC_RUNNER),
            ("scalene_runner", scalene::SCALENE_RUNNER),
            ("alloc_sample_runner", alloc_sample::SAMPLER_RUNNER),
            ("memray_window_runner", memray::MEMRAY_WINDOW_RUNNER),
            ("serving_window", serving::SERVING_WINDOW),
        ] {
            let out = python(
                &[
                    "-c",
                    "import sys; compile(sys.argv[1], sys.argv[2], 'exec')",
                    code,
                    name,
                ],
                dir.path(),
            );
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// The shared launcher runs a script and a `-m` module as `python` would: `__main__`, their
    /// own argv, the script's folder importable, and the exit status of a `SystemExit`.
    #[test]
    fn the_launcher_runs_scripts_and_modules_as_python_does() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("app");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("helper.py"), "VALUE = 7\n").unwrap();
        let body = "import sys, helper\nprint(__name__, sys.argv, helper.VALUE)\ncode = sys.argv[-1]\nraise SystemExit(int(code) if code.isdigit() else code)\n";
        std::fs::write(sub.join("main.py"), body).unwrap();
        std::fs::write(sub.join("mod.py"), body).unwrap();
        let launcher = format!(
            "{}\ntry:\n    run_target(sys.argv[1:])\nexcept SystemExit as e:\n    print('status', exit_status(e))",
            include_str!("py/sp_launch.py")
        );
        let launcher = format!("import sys\n{launcher}");
        let out = python(&["-c", &launcher, "app/main.py", "a", "3"], dir.path());
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text,
            "__main__ ['app/main.py', 'a', '3'] 7\nstatus 3\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = std::process::Command::new("python3")
            .args(["-c", &launcher, "-m", "mod", "b", "x"])
            .current_dir(dir.path())
            .env("PYTHONPATH", &sub)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("__main__ ['"),
            "{text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.ends_with("mod.py', 'b', 'x'] 7\nstatus 1\n"), "{text}");
    }

    #[test]
    fn every_method_is_registered_once() {
        for m in Method::ALL {
            assert_eq!(IMPLEMENTED.iter().filter(|x| **x == m).count(), 1, "{m:?}");
        }
        assert_eq!(IMPLEMENTED.len(), Method::ALL.len());
    }
}
