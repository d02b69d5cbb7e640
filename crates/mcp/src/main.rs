//! `system-profile`: serve the MCP tools over stdio (or WebSocket/HTTP), call one tool from a
//! shell, or write the tools' JSON Schemas. The glue between the libraries and the terminal:
//! the one place that prints (stdout is the protocol in `serve`, the result in `call`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod pipeline_cli;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use system_profile_engine::pipeline::Instrumentation;
use system_profile_engine::{Engine, EngineConfig, Progress};
use system_profile_mcp::guard;
use system_profile_mcp::listen::{self, Exposure};
use system_profile_mcp::router;
use system_profile_mcp::stdio::{self, StdioConfig};
use system_profile_mcp::tools::{self, ToolErrorKind};
use system_profile_model::report::Lang;

#[derive(Parser)]
#[command(
    name = "system-profile",
    version,
    about = "Profiling tools for agents: an MCP server and its CLI"
)]
struct Cli {
    /// Log level for stderr (error, warn, info, debug, trace, or a tracing filter such as
    /// `system_profile_mcp=debug`); RUST_LOG is read when this is not given.
    #[arg(long, global = true)]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct EngineArgs {
    /// The project root: paths resolve against it, artifacts go to <root>/profile_output/.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// The Python interpreter targets use when a call names none.
    #[arg(long, default_value = "python3")]
    python: String,
}

/// Who may use `serve --listen` (see `guard`).
#[derive(clap::Args, Clone)]
struct ListenAccess {
    /// Allow --listen on an address other than loopback (the bearer token still applies).
    #[arg(long, requires = "listen")]
    allow_remote: bool,
    /// Accept requests whose Origin header is exactly this (e.g. http://localhost:3000);
    /// repeatable. None by default: a request from a web page is refused.
    #[arg(long, value_name = "ORIGIN", requires = "listen")]
    allow_origin: Vec<String>,
    /// Accept this Host header besides the listening address and localhost (NAME:PORT);
    /// repeatable.
    #[arg(long, value_name = "HOST", requires = "listen")]
    allow_host: Vec<String>,
    /// Serve --listen without the bearer token. Any local program could then run commands
    /// as you, so it needs --no-auth-reason.
    #[arg(long, requires = "no_auth_reason")]
    no_auth: bool,
    /// Why the listener may go without its token (logged at start), e.g. "a network namespace
    /// of its own".
    #[arg(long, value_name = "WHY", requires = "no_auth")]
    no_auth_reason: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default for Claude Code), or WebSocket/HTTP with --listen.
    Serve {
        #[command(flatten)]
        engine: EngineArgs,
        /// Serve JSON-RPC over WebSocket and HTTP on this address instead of stdio
        /// (e.g. 127.0.0.1:8765; port 0 picks a free one).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        #[command(flatten)]
        access: ListenAccess,
        /// Seconds that calls still running when stdin closes may take to finish.
        #[arg(long, default_value_t = 30.0)]
        eof_grace_s: f64,
    },
    /// Run one tool and print its structured result as JSON (exit 1 when the tool fails,
    /// 2 when the arguments are wrong).
    Call {
        #[command(flatten)]
        engine: EngineArgs,
        /// The tool, as tools/list names it (detect_tools).
        tool: String,
        /// The tool's arguments as a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
    /// Profile a target end to end: identify, detect, plan, run the plan (within --budget),
    /// and write the report; prints where the report is.
    Profile {
        #[command(flatten)]
        engine: EngineArgs,
        /// Seconds the planned runs may take in all (runs that do not fit are skipped).
        #[arg(long, value_name = "SECONDS")]
        budget: Option<f64>,
        /// Apply the plan's measurement code to the target's files first (decorators, in the
        /// ledger), and revert it after the runs.
        #[arg(long)]
        instrument: bool,
        /// With --instrument: keep the changes (undo later with revert_changes).
        #[arg(long, requires = "instrument")]
        keep_changes: bool,
        /// The report's language: en or ja.
        #[arg(long, default_value = "en", value_parser = ["en", "ja"])]
        lang: String,
        /// What to profile, as after /system-profile: a script and its arguments
        /// (examples/cpu_hotspot.py 50), `pid 4121`, a service name, a focus word.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        target: Vec<String>,
    },
    /// The node part of cluster_nodes, started on a node of a cluster job by its engine
    /// (srun): observe the job's processes there, answering over stdin/stdout.
    Node {
        /// The Slurm job whose processes to observe on this node.
        #[arg(long, required_unless_present = "pids", conflicts_with = "pids")]
        slurm_job: Option<String>,
        /// These processes instead, as PID:RANK:LABEL (its rank among the job's processes on
        /// every node, what the engine calls it: a Ray actor's class and id), comma-separated.
        #[arg(long, value_delimiter = ',')]
        pids: Vec<String>,
        /// How long to observe, s.
        #[arg(long, default_value_t = 10.0)]
        window_s: f64,
        /// Samples per second of the /proc sampler and py-spy.
        #[arg(long, default_value_t = 20.0)]
        rate_hz: f64,
        /// Where this node's files go.
        #[arg(long)]
        out: PathBuf,
    },
    /// Write every tool's input and output JSON Schema (2020-12) into a folder.
    Schemas {
        /// The folder to write (created when missing).
        #[arg(long, default_value = "schemas")]
        out: PathBuf,
        /// Compare instead of writing: exit 1 and name the files that are stale.
        #[arg(long)]
        check: bool,
    },
}

fn init_logging(level: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(l) => EnvFilter::try_new(l).unwrap_or_else(|e| {
            eprintln!("system-profile: --log-level {l:?} is not a valid filter ({e}); using warn");
            EnvFilter::new("warn")
        }),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

fn engine(args: &EngineArgs) -> Result<Arc<Engine>> {
    let root = args
        .root
        .canonicalize()
        .with_context(|| format!("--root {}: no such folder", args.root.display()))?;
    if !root.is_dir() {
        bail!("--root {} is not a folder", root.display());
    }
    Ok(Arc::new(Engine::new(EngineConfig {
        root,
        default_python: args.python.clone(),
    })))
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot watch SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
    }
}

async fn serve(
    engine_args: EngineArgs,
    listen_addr: Option<String>,
    access: ListenAccess,
    eof_grace_s: f64,
) -> Result<()> {
    let engine = engine(&engine_args)?;
    let module = router::build(engine.clone());
    match listen_addr {
        None => {
            if !(eof_grace_s.is_finite() && eof_grace_s >= 0.0) {
                bail!("--eof-grace-s {eof_grace_s}: give seconds, 0 or more");
            }
            let config = StdioConfig {
                eof_grace: Duration::from_secs_f64(eof_grace_s),
                ..StdioConfig::default()
            };
            let end = stdio::serve(
                module.into(),
                tokio::io::stdin(),
                tokio::io::stdout(),
                config,
                shutdown_signal(),
            )
            .await?;
            tracing::info!(?end, "stdio session over");
            // The calls' own process groups are gone already; these are what escaped them.
            let escaped = Engine::kill_all_runs();
            if escaped > 0 {
                tracing::info!(escaped, "killed processes that had left their runs' groups");
            }
        }
        Some(addr) => {
            let exposure = if access.allow_remote {
                Exposure::AllowRemote
            } else {
                Exposure::LoopbackOnly
            };
            let addr = listen::resolve(&addr, exposure).await?;
            let auth = match access.no_auth_reason {
                Some(reason) if access.no_auth => {
                    tracing::warn!(%reason, "--listen without a bearer token");
                    guard::Auth::Off { reason }
                }
                _ => guard::Auth::Token(guard::new_token().context("cannot draw a token")?),
            };
            let token_file = match &auth {
                guard::Auth::Token(token) => Some(engine.write_listen_token(token).context(
                    "cannot write profile_output/.listen-token (mode 0600) under --root",
                )?),
                guard::Auth::Off { .. } => None,
            };
            let listener = listen::start(module, addr, |local_addr| guard::Policy {
                local_addr,
                allowed_hosts: access.allow_host,
                allowed_origins: access.allow_origin,
                auth: auth.clone(),
            })
            .await?;
            // The one line a script waits for; the port is real even when 0 was asked for.
            eprintln!(
                "system-profile: listening on http://{0} and ws://{0}",
                listener.local_addr
            );
            if let (guard::Auth::Token(token), Some(file)) = (&auth, token_file) {
                eprintln!(
                    "system-profile: bearer token {token} (send `Authorization: Bearer <token>`; \
                     also in {}, mode 0600)",
                    file.display()
                );
            }
            shutdown_signal().await;
            let _ = listener.handle.stop();
            listener.handle.stopped().await;
            Engine::kill_all_runs();
        }
    }
    Ok(())
}

async fn call(engine_args: EngineArgs, name: &str, arguments: &str) -> Result<ExitCode> {
    let Some(tool) = tools::find(name) else {
        eprintln!(
            "system-profile: no tool {name:?}; the tools are: {}",
            tools::names()
        );
        return Ok(ExitCode::from(2));
    };
    let arguments: serde_json::Value = match serde_json::from_str(arguments) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("system-profile: the arguments are not JSON ({e}); give an object such as '{{\"refresh\": true}}'");
            return Ok(ExitCode::from(2));
        }
    };
    let engine = engine(&engine_args)?;
    match tool.call(&engine, arguments, &Progress::none()).await {
        Ok(value) => {
            // A closed pipe (`| head`) is the reader's choice, not a failure worth a panic.
            use std::io::Write as _;
            let text = serde_json::to_string_pretty(&value)?;
            let _ = writeln!(std::io::stdout().lock(), "{text}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("system-profile: {name}: {}", e.message());
            Ok(match e.kind() {
                ToolErrorKind::InvalidArguments { .. } => ExitCode::from(2),
                ToolErrorKind::Failed => ExitCode::from(1),
            })
        }
    }
}

/// Write `text` as `name` in the folder `out` with the project's one atomic write (temp,
/// fsync, rename, fsync of the folder: `confine`), so no reader sees half a file.
fn write_atomically(out: &Path, name: &str, text: &str) -> Result<()> {
    let folder = system_profile_confine::Confined::open(out)
        .with_context(|| format!("opening {}", out.display()))?;
    folder
        .write_atomic(
            Path::new(name),
            &format!(".{name}.tmp"),
            text.as_bytes(),
            0o644,
            || {},
        )
        .with_context(|| format!("writing {}", out.join(name).display()))
}

fn is_schema_file(name: &str) -> bool {
    name.ends_with(".input.json") || name.ends_with(".output.json")
}

fn schemas(out: &Path, check: bool) -> Result<ExitCode> {
    let files = tools::schema_files();
    let wanted: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    let existing: Vec<String> = match std::fs::read_dir(out) {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| is_schema_file(n))
            .collect(),
        Err(_) => Vec::new(),
    };
    let extra: Vec<&String> = existing
        .iter()
        .filter(|n| !wanted.contains(&n.as_str()))
        .collect();
    if check {
        let mut stale: Vec<String> = files
            .iter()
            .filter(|(name, text)| {
                std::fs::read_to_string(out.join(name)).ok().as_deref() != Some(text)
            })
            .map(|(name, _)| name.clone())
            .collect();
        stale.extend(extra.iter().map(|n| format!("{n} (no such tool)")));
        if stale.is_empty() {
            eprintln!(
                "system-profile: {} schema files in {} are current",
                files.len(),
                out.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "system-profile: stale schemas in {}: {}; run `system-profile schemas --out {}`",
            out.display(),
            stale.join(", "),
            out.display()
        );
        return Ok(ExitCode::from(1));
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for (name, text) in &files {
        write_atomically(out, name, text)?;
    }
    for name in extra {
        std::fs::remove_file(out.join(name)).with_context(|| format!("removing stale {name}"))?;
    }
    eprintln!(
        "system-profile: wrote {} schema files to {}",
        files.len(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Start the watchdog and end what dead servers left; both best-effort, said in the log.
fn guard_children() -> Option<system_profile_engine::Watchdog> {
    let orphans = Engine::end_orphans_of_dead_servers();
    if orphans > 0 {
        tracing::warn!(
            orphans,
            "killed processes left running by a server that died"
        );
    }
    let program = std::env::current_exe().ok()?;
    match Engine::start_watchdog(&program) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!("no watchdog ({e}): if this server is killed, its runs outlive it");
            None
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(system_profile_engine::WATCHDOG_ARG) {
        let server = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(0);
        if server > 1 {
            system_profile_engine::watchdog_main(server);
        }
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    init_logging(cli.log_level.as_deref());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("system-profile: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Serving and profiling start children: they get a watchdog for the server's life.
    let _watchdog = matches!(cli.command, Command::Serve { .. } | Command::Profile { .. })
        .then(guard_children)
        .flatten();
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve {
                engine,
                listen,
                access,
                eof_grace_s,
            } => serve(engine, listen, access, eof_grace_s)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Call {
                engine,
                tool,
                arguments,
            } => call(engine, &tool, &arguments).await,
            Command::Profile {
                engine: engine_args,
                budget,
                instrument,
                keep_changes,
                lang,
                target,
            } => {
                let python = (engine_args.python != "python3").then(|| engine_args.python.clone());
                let args = pipeline_cli::ProfileArgs {
                    words: target,
                    budget_s: budget,
                    instrumentation: match (instrument, keep_changes) {
                        (false, _) => Instrumentation::Off,
                        (true, false) => Instrumentation::ApplyAndRevert,
                        (true, true) => Instrumentation::ApplyAndKeep,
                    },
                    lang: if lang == "ja" { Lang::Ja } else { Lang::En },
                    python,
                };
                match engine(&engine_args) {
                    Ok(e) => pipeline_cli::run(e, args, shutdown_signal()).await,
                    Err(e) => Err(e),
                }
            }
            Command::Schemas { out, check } => schemas(&out, check),
            Command::Node {
                slurm_job,
                pids,
                window_s,
                rate_hz,
                out,
            } => {
                use system_profile_runner::node::NodeTarget;
                let target = match slurm_job {
                    Some(job) => NodeTarget::SlurmJob(job),
                    None => NodeTarget::Pids(
                        pids.iter()
                            .filter_map(|p| {
                                let mut parts = p.splitn(3, ':');
                                let pid = parts.next()?.trim().parse().ok()?;
                                let rank = parts.next()?.trim().parse().ok()?;
                                Some((pid, rank, parts.next().unwrap_or("").to_string()))
                            })
                            .collect(),
                    ),
                };
                let request = system_profile_runner::node::NodeRequest {
                    target,
                    window: Duration::from_secs_f64(window_s.max(0.1)),
                    rate_hz,
                    out_dir: out,
                };
                let stdin = tokio::io::BufReader::new(tokio::io::stdin());
                system_profile_runner::node::serve(&request, stdin, tokio::io::stdout())
                    .await
                    .map(|()| ExitCode::SUCCESS)
                    .context("the node part's exchange on stdin/stdout")
            }
        }
    });
    // Blocking readers (stdin) must not keep the process alive after the session is over.
    runtime.shutdown_timeout(Duration::from_millis(500));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("system-profile: {e:#}");
            ExitCode::FAILURE
        }
    }
}
