//! The identification table: argument strings with the kind, focus and resolution they must
//! give, against the fixture's real files and processes.

use crate::fixture::{fixture, identify_here, Fixture};
use system_profile_model::target::{Focus as FocusArea, Target, TargetKind};

type Check = Box<dyn Fn(&Target, &Fixture) -> Result<(), String>>;

struct Case {
    arguments: String,
    kind: TargetKind,
    focus: Vec<FocusArea>,
    clarify: bool,
    check: Check,
}

fn case(
    arguments: &str,
    kind: TargetKind,
    focus: &[FocusArea],
    clarify: bool,
    check: Check,
) -> Case {
    Case {
        arguments: arguments.to_string(),
        kind,
        focus: focus.to_vec(),
        clarify,
        check,
    }
}

fn ok() -> Check {
    Box::new(|_, _| Ok(()))
}

fn ensure(cond: bool, what: impl Into<String>) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what.into())
    }
}

fn question_has(needle: &'static str) -> Check {
    Box::new(move |t, _| {
        ensure(
            t.questions.iter().any(|q| q.contains(needle)),
            format!("no question mentions {needle:?}: {:?}", t.questions),
        )
    })
}

fn script(name: &'static str, argv: &'static [&'static str]) -> Check {
    Box::new(move |t, fx| {
        let s = t.script.as_ref().ok_or("no script")?;
        ensure(
            s.path == fx.dir.join(name).to_string_lossy(),
            format!("path {}", s.path),
        )?;
        ensure(s.argv == argv, format!("argv {:?}", s.argv))?;
        let cmd = t.command.as_ref().ok_or("no command")?;
        ensure(
            cmd.ends_with(&argv.iter().map(|a| a.to_string()).collect::<Vec<_>>()),
            format!("command {cmd:?}"),
        )?;
        ensure(cmd[1] == s.path, format!("command {cmd:?}"))
    })
}

fn framework(recipe: &'static str) -> Check {
    Box::new(move |t, _| {
        let f = t.framework.as_ref().ok_or("no framework")?;
        ensure(f.recipe == recipe, format!("framework {}", f.recipe))
    })
}

fn both(a: Check, b: Check) -> Check {
    Box::new(move |t, fx| {
        a(t, fx)?;
        b(t, fx)
    })
}

fn function(qualname: Option<&'static str>, start: u32, end: u32) -> Check {
    Box::new(move |t, _| {
        let f = t.function.as_ref().ok_or("no function")?;
        ensure(
            f.qualname.as_deref() == qualname,
            format!("qualname {:?}", f.qualname),
        )?;
        ensure(
            (f.start_line, f.end_line) == (start, end),
            format!("lines {}-{}", f.start_line, f.end_line),
        )
    })
}

fn process(pid: fn(&Fixture) -> u32) -> Check {
    Box::new(move |t, fx| {
        let want = pid(fx);
        let p = t.processes.first().ok_or("no process")?;
        ensure(p.pid == want, format!("pid {} not {want}", p.pid))?;
        ensure(p.is_python, "not seen as Python")?;
        ensure(p.python_version.is_some(), "no Python version")?;
        ensure(
            !p.cmdline.is_empty() && p.exe.is_some(),
            "no cmdline or exe",
        )
    })
}

fn cases(fx: &Fixture) -> Vec<Case> {
    use FocusArea::*;
    use TargetKind::*;
    let pid = fx.python_pid;
    vec![
        case(
            "",
            Unknown,
            &[],
            true,
            question_has("What should I profile"),
        ),
        case(
            "   ",
            Unknown,
            &[],
            true,
            question_has("Python files here: agents.py"),
        ),
        case(
            "train.py",
            PythonScript,
            &[],
            false,
            both(script("train.py", &[]), framework("torch_training")),
        ),
        case(
            "train.py gpu",
            PythonScript,
            &[Gpu],
            false,
            script("train.py", &[]),
        ),
        case(
            "train.py --epochs 3 --device gpu",
            PythonScript,
            &[],
            false,
            script("train.py", &["--epochs", "3", "--device", "gpu"]),
        ),
        case(
            "train.py -- gpu",
            PythonScript,
            &[],
            false,
            script("train.py", &["gpu"]),
        ),
        case(
            "train.pyのメモリ",
            PythonScript,
            &[Memory],
            false,
            script("train.py", &[]),
        ),
        case(
            "profile train.py",
            PythonScript,
            &[],
            false,
            script("train.py", &[]),
        ),
        case(
            "python3 train.py --lr 0.1",
            PythonScript,
            &[],
            false,
            both(
                script("train.py", &["--lr", "0.1"]),
                Box::new(|t, _| {
                    ensure(
                        t.python.as_ref().is_some_and(|p| {
                            p.requested == "python3" && p.chosen_because.contains("command line")
                        }),
                        format!("{:?}", t.python),
                    )
                }),
            ),
        ),
        case(
            "ddp_train.py interconnect",
            PythonScript,
            &[Interconnect],
            false,
            framework("torch_ddp"),
        ),
        case("agents.py", PythonScript, &[], false, framework("autogen")),
        case("学習.py", PythonScript, &[], false, script("学習.py", &[])),
        case("pkgdir/", PythonScript, &[], false, ok()),
        case(
            "-m mypkg.cli --flag",
            PythonModule,
            &[],
            false,
            Box::new(|t, _| {
                let m = t.module.as_ref().ok_or("no module")?;
                ensure(
                    m.origin
                        .as_deref()
                        .is_some_and(|o| o.ends_with("mypkg/cli.py")),
                    format!("{:?}", m.origin),
                )?;
                ensure(m.argv == ["--flag"], format!("{:?}", m.argv))
            }),
        ),
        case("python3 -m mypkg.cli", PythonModule, &[], false, ok()),
        case("mypkg.cli", PythonModule, &[], false, ok()),
        case(
            "-m nosuchpkg.mod",
            PythonModule,
            &[],
            true,
            question_has("not importable"),
        ),
        case(
            "app.py:Trainer.step",
            Function,
            &[],
            false,
            function(Some("Trainer.step"), 10, 14),
        ),
        case(
            "app.py:step",
            Function,
            &[],
            false,
            function(Some("Trainer.step"), 10, 14),
        ),
        case(
            "app.py:fetch cpu",
            Function,
            &[Cpu],
            false,
            both(
                function(Some("fetch"), 21, 23),
                Box::new(|t, _| {
                    let d = t
                        .function
                        .as_ref()
                        .and_then(|f| f.def.as_ref())
                        .ok_or("no def")?;
                    ensure(d.def_kind == "async_function", d.def_kind.clone())
                }),
            ),
        ),
        case(
            "app.py:Trainer.Inner.helper",
            Function,
            &[],
            false,
            function(Some("Trainer.Inner.helper"), 17, 18),
        ),
        case(
            "app.py:11-13",
            Function,
            &[],
            false,
            function(Some("Trainer.step"), 11, 13),
        ),
        case("app.py:1", Function, &[], false, function(None, 1, 1)),
        case(
            "app.py:999-1000",
            Function,
            &[],
            true,
            question_has("Lines 999-1000 are not inside"),
        ),
        case(
            "app.py:stepp",
            Function,
            &[],
            true,
            question_has("Did you mean `Trainer.step`"),
        ),
        case(
            "mypkg.cli:main",
            Function,
            &[],
            false,
            function(Some("main"), 1, 2),
        ),
        case(
            "trian.py",
            Unknown,
            &[],
            true,
            question_has("Did you mean train.py"),
        ),
        case(
            "missing/dir/x.py",
            Unknown,
            &[],
            true,
            question_has("does not exist"),
        ),
        case("scripts/", Unknown, &[], true, question_has("a.py, b.py")),
        case(
            "data.csv",
            Unknown,
            &[],
            true,
            question_has("neither a Python file nor an executable"),
        ),
        case(
            "./run.sh --fast",
            Command,
            &[],
            false,
            Box::new(|t, _| {
                ensure(
                    t.command.as_deref()
                        == Some(&["./run.sh".to_string(), "--fast".to_string()][..]),
                    format!("{:?}", t.command),
                )
            }),
        ),
        case(
            "./tool --x",
            PythonScript,
            &[],
            false,
            script("tool", &["--x"]),
        ),
        case(
            "ls -la",
            Command,
            &[],
            false,
            Box::new(|t, _| {
                ensure(
                    t.program
                        .as_ref()
                        .and_then(|p| p.program_path.as_deref())
                        .is_some_and(|p| p.ends_with("/ls")),
                    "ls not found on PATH",
                )
            }),
        ),
        case(
            &format!("pid {pid}"),
            Process,
            &[],
            false,
            process(|fx| fx.python_pid),
        ),
        case(
            &format!("{pid}"),
            Process,
            &[],
            false,
            process(|fx| fx.python_pid),
        ),
        case(
            &format!("PID={pid} cpu"),
            Process,
            &[Cpu],
            false,
            process(|fx| fx.python_pid),
        ),
        case(
            &format!("プロセス {pid} のメモリ"),
            Process,
            &[Memory],
            false,
            process(|fx| fx.python_pid),
        ),
        case(
            "pid 4194000",
            Unknown,
            &[],
            true,
            question_has("No process 4194000 is running"),
        ),
        case(
            &format!("http://localhost:{}/v1/models gpu", fx.listener_port),
            Process,
            &[Gpu],
            false,
            process(|fx| fx.listener_pid),
        ),
        case(
            &format!("127.0.0.1:{}", fx.listener_port),
            Process,
            &[],
            false,
            process(|fx| fx.listener_pid),
        ),
        case(
            &format!("port {}", fx.listener_port),
            Process,
            &[],
            false,
            process(|fx| fx.listener_pid),
        ),
        case(
            "port 1",
            Unknown,
            &[],
            true,
            question_has("Nothing on this machine listens on port 1"),
        ),
        case(
            "http://10.1.2.3:8000",
            Unknown,
            &[],
            true,
            question_has("on another machine (10.1.2.3)"),
        ),
        case(
            &fx.service,
            Service,
            &[],
            false,
            Box::new(|t, fx| {
                let s = t.service.as_ref().ok_or("no service")?;
                ensure(
                    s.roots == [fx.service_master],
                    format!("roots {:?}", s.roots),
                )?;
                ensure(
                    t.processes.len() == 3,
                    format!("{} processes", t.processes.len()),
                )?;
                ensure(
                    t.processes
                        .iter()
                        .filter(|p| p.role.as_deref() == Some("worker"))
                        .count()
                        == 2,
                    "two workers",
                )
            }),
        ),
        case(
            &format!("{} memory", fx.service),
            Service,
            &[Memory],
            false,
            ok(),
        ),
        case(
            &fx.dup,
            Service,
            &[],
            true,
            Box::new(|t, fx| {
                let q = t.questions.join(" ");
                ensure(
                    fx.dup_pids.iter().all(|p| q.contains(&p.to_string()))
                        && q.contains("2 separate processes"),
                    q,
                )
            }),
        ),
        case(
            "vllm serving",
            Framework,
            &[],
            false,
            Box::new(|t, fx| {
                let f = t.framework.as_ref().ok_or("no framework")?;
                ensure(f.recipe == "vllm_serving", f.recipe.clone())?;
                let pids = |name: &str| {
                    f.components
                        .iter()
                        .find(|c| c.name == name)
                        .map(|c| c.pids.len())
                        .unwrap_or(0)
                };
                ensure(
                    pids("api server") == 1 && pids("engine core") == 1 && pids("worker") == 2,
                    format!("{:?}", f.components),
                )?;
                ensure(f.components[0].pids == [fx.vllm_api_pid], "api server pid")?;
                ensure(
                    f.facts.get("tensor_parallel").map(String::as_str) == Some("2"),
                    format!("{:?}", f.facts),
                )?;
                ensure(
                    f.facts.get("port").map(String::as_str) == Some("8123"),
                    format!("{:?}", f.facts),
                )?;
                ensure(
                    f.facts.get("model").map(String::as_str) == Some("facebook/opt-125m"),
                    format!("{:?}", f.facts),
                )
            }),
        ),
        case(
            "vllm serving の interconnect",
            Framework,
            &[Interconnect],
            false,
            framework("vllm_serving"),
        ),
        case(
            "ＶＬＬＭ　サービングのメモリ",
            Framework,
            &[Memory],
            false,
            framework("vllm_serving"),
        ),
        case(
            "sglang",
            Framework,
            &[],
            true,
            question_has("python -m sglang.launch_server"),
        ),
        case(
            "torch training gpu",
            Framework,
            &[Gpu],
            true,
            question_has("No PyTorch training process is running"),
        ),
        case(
            "分散学習の通信",
            Framework,
            &[Interconnect],
            true,
            framework("torch_ddp"),
        ),
        case("autogen", Framework, &[], true, framework("autogen")),
        case("ray", Framework, &[], true, framework("ray")),
        case(
            "triton server",
            Framework,
            &[],
            true,
            framework("triton_server"),
        ),
        case("gpu", Focus, &[Gpu], false, ok()),
        case("メモリ", Focus, &[Memory], false, ok()),
        case("通信とGPU", Focus, &[Interconnect, Gpu], false, ok()),
        case("cpu io", Focus, &[Cpu, Io], false, ok()),
        case("nvlink topology", Focus, &[Interconnect], false, ok()),
        case(
            "xyzzy-not-a-thing",
            Unknown,
            &[],
            true,
            question_has("is not a file here"),
        ),
        case("謎の言葉", Unknown, &[], true, ok()),
    ]
}

#[tokio::test]
async fn the_identification_table() {
    let fx = fixture();
    let table = cases(fx);
    assert!(table.len() >= 40, "{} cases", table.len());
    let mut failures = Vec::new();
    for c in &table {
        let t = identify_here(&c.arguments).await;
        let mut problems = Vec::new();
        if t.kind != c.kind {
            problems.push(format!("kind {:?}, expected {:?}", t.kind, c.kind));
        }
        if t.focus != c.focus {
            problems.push(format!("focus {:?}, expected {:?}", t.focus, c.focus));
        }
        if t.needs_clarification != c.clarify {
            problems.push(format!(
                "needs_clarification {}, expected {} (questions {:?})",
                t.needs_clarification, c.clarify, t.questions
            ));
        }
        if t.needs_clarification && t.questions.is_empty() {
            problems.push("clarification without a question".into());
        }
        if !t.needs_clarification && t.summary.is_empty() {
            problems.push("no summary".into());
        }
        if let Err(e) = (c.check)(&t, fx) {
            problems.push(e);
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{:?}: {}\n  summary: {}\n  evidence: {:?}",
                c.arguments,
                problems.join("; "),
                t.summary,
                t.evidence
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn a_focus_word_after_a_flag_is_its_value_and_the_evidence_says_so() {
    let t = identify_here("train.py memory --device cuda").await;
    assert_eq!(t.focus, vec![FocusArea::Memory]);
    assert!(
        t.evidence
            .iter()
            .any(|e| e.contains("`memory` read as a focus word")),
        "{:?}",
        t.evidence
    );
    assert_eq!(t.script.unwrap().argv, vec!["--device", "cuda"]);
}

#[tokio::test]
async fn a_script_outline_has_exact_ranges_and_calls() {
    let t = identify_here("train.py").await;
    let o = t.script.unwrap().outline.unwrap();
    assert_eq!(o.imports, vec!["torch"]);
    assert!(o.has_main_guard);
    let step = o
        .defs
        .iter()
        .find(|d| d.qualname == "Trainer.step")
        .unwrap();
    assert_eq!((step.start_line, step.end_line), (9, 13));
    for call in ["to", "backward", "sum", "model"] {
        assert!(
            step.notable_calls.iter().any(|c| c == call),
            "{call}: {:?}",
            step.notable_calls
        );
    }
    let main = o.defs.iter().find(|d| d.qualname == "main").unwrap();
    assert!(main.has_loop);
}

#[tokio::test]
async fn a_dead_process_and_this_server_are_refused() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let t = identify_here(&format!("pid {pid}")).await;
    assert!(t.needs_clarification);
    assert!(
        t.questions[0].contains(&format!("No process {pid} is running")),
        "{:?}",
        t.questions
    );
    let t = identify_here(&format!("pid {}", std::process::id())).await;
    assert!(t.needs_clarification);
    assert!(
        t.questions[0].contains("this profiling server itself"),
        "{:?}",
        t.questions
    );
}

#[tokio::test]
async fn a_running_process_in_a_venv_gets_the_venvs_interpreter_and_says_why() {
    let fx = fixture();
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("svc-venv");
    let made = std::process::Command::new(&fx.python)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let in_venv = venv.join("bin/python").to_string_lossy().into_owned();
    // The interpreter behind the venv's symlink: what /proc/<pid>/exe shows for either.
    let base = std::fs::canonicalize(&in_venv)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let venv_root = venv.to_string_lossy().into_owned();
    for (python, env, want, because) in [
        (in_venv.as_str(), vec![], in_venv.as_str(), "argv[0]"),
        (
            base.as_str(),
            vec![("VIRTUAL_ENV", venv_root.as_str())],
            in_venv.as_str(),
            "VIRTUAL_ENV",
        ),
        (base.as_str(), vec![], base.as_str(), "runs it"),
    ] {
        // Not a child of this binary: identification leaves its own tree out. It ends when
        // `_stdin` is dropped.
        let env: Vec<(&str, &std::path::Path)> = env
            .iter()
            .map(|(k, v)| (*k, std::path::Path::new(*v)))
            .collect();
        let (pid, _stdin) = crate::fixture::start_detached(
            python,
            &[python, "-c", crate::fixture::WATCH_STDIN],
            &env,
            dir.path(),
        );
        // The process is there once /proc shows it running Python (a busy machine may be slow
        // to exec it).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let t = loop {
            let t = identify_here(&format!("pid {pid}")).await;
            if t.python.is_some() || std::time::Instant::now() > deadline {
                break t;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        let chosen = t
            .python
            .as_ref()
            .unwrap_or_else(|| panic!("{python} {env:?}: {t:#?}"));
        assert_eq!(
            chosen.executable.as_deref(),
            Some(want),
            "{python} {env:?}: {chosen:?}"
        );
        assert!(
            chosen.chosen_because.contains(because),
            "{python} {env:?}: {chosen:?}"
        );
    }
}
