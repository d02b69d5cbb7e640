//! `identify_target`: what the user named after `/system-profile`, resolved against the files,
//! processes and Python environment of this machine.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Input of `identify_target`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentifyTargetInput {
    /// What the user typed after `/system-profile` (`$ARGUMENTS`), as is: may be empty, English
    /// or Japanese, and may mix a target with focus words ("train.py gpu",
    /// "vllm serving の interconnect", "pid 4121", "app.py:Trainer.step").
    #[serde(default)]
    pub arguments: String,
    /// Directory relative paths are resolved against (default: the server's root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The Python interpreter for Python targets (a path or a name on PATH). Default: a
    /// virtual environment beside the target (`.venv`, `venv`) when there is one, else the
    /// server's `--python`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
}

/// What kind of thing the target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A Python file to run (`train.py --epochs 1`).
    PythonScript,
    /// A Python module to run with `-m` (`-m pkg.tool`, or a dotted name that resolves).
    PythonModule,
    /// Any other program to run (`./server --port 8080`, `ffmpeg -i in.mp4 out.webm`).
    Command,
    /// One running process, by PID.
    Process,
    /// Running processes found by name (a service), with their children.
    Service,
    /// One function, method or line range of a Python file (`app.py:Trainer.step`,
    /// `app.py:120-180`, `pkg.mod:func`).
    Function,
    /// A framework or whole system (vLLM serving, torch training, autogen, Ray, ...), with the
    /// components found running and its entry points.
    Framework,
    /// Only focus words ("gpu", "メモリ"): the whole machine, seen through that focus.
    Focus,
    /// A job of a cluster engine (`slurm job 1234`): its processes on every node it holds,
    /// reached through that engine.
    ClusterJob,
    /// Nothing could be resolved; see `questions`.
    Unknown,
}

/// A focus area of the profile.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Focus {
    Cpu,
    Memory,
    Gpu,
    Interconnect,
    /// Disk and network I/O, syscalls.
    Io,
    /// The machine as a whole: run queue, context switches, all processes.
    System,
}

impl Focus {
    pub const ALL: [Focus; 6] = [
        Focus::Cpu,
        Focus::Memory,
        Focus::Gpu,
        Focus::Interconnect,
        Focus::Io,
        Focus::System,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Focus::Cpu => "cpu",
            Focus::Memory => "memory",
            Focus::Gpu => "gpu",
            Focus::Interconnect => "interconnect",
            Focus::Io => "io",
            Focus::System => "system",
        }
    }
}

/// A word of the arguments and the focus it was read as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FocusWord {
    pub word: String,
    pub focus: Focus,
}

/// The interpreter a Python target will run with, and why that one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PythonChoice {
    /// As asked for, found, or defaulted to.
    pub requested: String,
    /// `sys.executable` (the real interpreter behind shims such as pyenv's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why this interpreter: the `python` argument, a venv beside the target, the script's
    /// shebang, the command line, or the server's default.
    pub chosen_because: String,
}

/// A function or class of a Python file, from the file's syntax tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PythonDef {
    /// Dotted name inside the file (`Trainer.step`, `main`, `outer.<locals>.inner` is given as
    /// `outer.inner`).
    pub qualname: String,
    /// `function`, `async_function`, `method`, `async_method` or `class`.
    pub def_kind: String,
    /// First line, counting decorators (1-based).
    pub start_line: u32,
    /// The `def`/`class` line itself.
    pub def_line: u32,
    /// Last line (inclusive).
    pub end_line: u32,
    /// Names of the functions and methods this definition calls (`to`, `cuda`, `backward`,
    /// `all_reduce`, `DataLoader`, ...), sorted; recipes choose instrumentation from them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notable_calls: Vec<String>,
    /// Contains a `for` or `while` loop.
    pub has_loop: bool,
}

/// What the syntax tree of a Python file says: its definitions and imports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PythonOutline {
    /// Lines in the file.
    pub lines: u32,
    /// Top-level packages imported anywhere in the file, sorted (`torch`, `numpy`, `vllm`).
    pub imports: Vec<String>,
    /// Functions, methods and classes, in source order.
    pub defs: Vec<PythonDef>,
    /// Names called at module level (outside any def), sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub module_level_calls: Vec<String>,
    /// `if __name__ == "__main__":` is present.
    pub has_main_guard: bool,
    /// Why there is no outline or it is partial (syntax error, interpreter missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A Python file to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ScriptTarget {
    /// Absolute path.
    pub path: String,
    /// Arguments after the script, kept as argv.
    pub argv: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outline: Option<PythonOutline>,
}

/// A distributed launcher (`torchrun`, `python -m torch.distributed.run`, `accelerate launch`,
/// `deepspeed`) and what its options say of the job. The target's `command` is the whole
/// argv: every run that starts the program starts it under the same launcher.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LauncherTarget {
    /// `torchrun`, `torch.distributed.run`, `torch.distributed.launch`, `accelerate` or
    /// `deepspeed`.
    pub program: String,
    /// The launcher and its options, up to the entry point.
    pub argv: Vec<String>,
    /// The entry point and its arguments: a script, or `-m module` when the launcher runs a
    /// module (`-m`/`--module` among its options).
    pub entry: Vec<String>,
    /// As given (`2`, `1:4` for an elastic range).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nnodes: Option<String>,
    /// Processes per node as given (`2`, `auto`, `gpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nproc_per_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_rank: Option<u32>,
    /// Where the nodes meet (`127.0.0.1:29500`), or `standalone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendezvous: Option<String>,
    /// Ranks in all, when the options fix it (nodes × processes per node, or accelerate's
    /// `--num_processes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// The launcher processes (elastic agents) running on this machine for the job: two or
    /// more when several nodes of it run here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<u32>,
    /// The ranks running now (a launcher found by PID or name), from their environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankProcess>,
}

/// One running rank of a distributed job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RankProcess {
    pub pid: u32,
    /// Its launcher (the elastic agent) when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_pid: Option<u32>,
    #[serde(flatten)]
    pub ids: RankIds,
}

/// A process's place in a distributed job: `RANK`, `LOCAL_RANK` and `GROUP_RANK` (its node)
/// from its environment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RankIds {
    /// `RANK`: its place among all ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// `LOCAL_RANK`: its place on its node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// `GROUP_RANK`: its node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_rank: Option<u32>,
}

/// A Python module to run with `-m`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModuleTarget {
    pub name: String,
    /// The file the module resolves to (`importlib.util.find_spec(name).origin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    pub argv: Vec<String>,
}

/// A program to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CommandTarget {
    pub argv: Vec<String>,
    /// Where the program was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_path: Option<String>,
    /// The program is a Python interpreter or a Python entry-point script.
    pub is_python: bool,
}

/// A running process, from /proc/<pid>.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    /// The kernel's short name (/proc/<pid>/comm).
    pub name: String,
    /// /proc/<pid>/cmdline, split at NULs.
    pub cmdline: Vec<String>,
    /// /proc/<pid>/exe, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    /// /proc/<pid>/cwd, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub uid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// State letter from /proc/<pid>/stat (R, S, D, Z, T, ...).
    pub state: String,
    pub threads: u32,
    pub rss_bytes: u64,
    /// Seconds since the process started.
    pub elapsed_s: f64,
    /// PIDs of its direct children.
    pub children: Vec<u32>,
    /// Runs a Python interpreter (its exe or a mapped libpython says so).
    pub is_python: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_version: Option<String>,
    /// The script or `-m` module a Python process runs, from its cmdline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_entry: Option<String>,
    /// The component it plays in a framework or service (`api server`, `worker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// A systemd unit and its main process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SystemdUnit {
    pub unit: String,
    pub active_state: String,
    /// 0 when the unit runs no process.
    pub main_pid: u32,
}

/// Processes found for a service name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ServiceMatch {
    /// The name as given.
    pub name: String,
    /// PIDs whose name or cmdline matched.
    pub matched_pids: Vec<u32>,
    /// Matched processes whose parent did not match: one per independent instance. One root
    /// means one service (its children are its workers); several mean the name is ambiguous.
    pub roots: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub systemd_unit: Option<SystemdUnit>,
}

/// One line or block of a Python file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CodeLocation {
    /// Absolute path of the file.
    pub path: String,
    /// The function or method (`Trainer.step`), when one was named or encloses the lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qualname: Option<String>,
    /// The Python module it was named through (`pkg.mod`), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    pub start_line: u32,
    pub end_line: u32,
    /// The definition, when the location is a whole function, method or class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub def: Option<PythonDef>,
    /// The file's outline, for planning measurements from what the code does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outline: Option<PythonOutline>,
}

/// A component of a framework and the processes that play it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ComponentMatch {
    pub name: String,
    pub description: String,
    pub pids: Vec<u32>,
}

/// A framework or whole system, from its recipe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FrameworkMatch {
    /// The recipe's id (`vllm_serving`), the file `recipes/<id>.toml`.
    pub recipe: String,
    pub name: String,
    /// The words of the arguments that named it.
    pub matched_words: Vec<String>,
    /// Every component of the recipe, with the processes running it now (maybe none).
    pub components: Vec<ComponentMatch>,
    /// How it is usually started.
    pub entry_points: Vec<String>,
    /// The Python package and its version, when the interpreter has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_version: Option<String>,
    /// Facts read from the running processes' command lines (`port`, `model`,
    /// `tensor_parallel`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
}

/// Output of `identify_target`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Target {
    /// What `plan_profile` takes instead of the whole target (`t1`, `t2`, ...): the server
    /// keeps every target it identified for its session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_id: Option<String>,
    /// The arguments as given.
    pub arguments: String,
    pub kind: TargetKind,
    /// Focus areas named by the arguments, in order; empty when none was named.
    pub focus: Vec<Focus>,
    /// Which words gave which focus.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub focus_words: Vec<FocusWord>,
    /// Profiler switches the words asked for (`idle`, `gil`, `native`, `leaks`): the plan sets
    /// them on every step whose method reads them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asked_options: Vec<crate::options::AskedOption>,
    /// The target could not be resolved to one thing: ask `questions` before profiling.
    pub needs_clarification: bool,
    /// Concrete questions for the user, each answerable in a word or a PID.
    pub questions: Vec<String>,
    /// One line saying what the target is.
    pub summary: String,
    /// Directory the arguments were resolved against.
    pub cwd: String,
    /// The argv that starts the target, when it is something to start (script, module,
    /// command, function's file, a framework's entry point when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<PythonChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<ModuleTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<CommandTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<CodeLocation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<FrameworkMatch>,
    /// The distributed launcher the command starts under, or the running one found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<LauncherTarget>,
    /// The cluster job the target is, as its engine describes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterJob>,
    /// The running processes of the target (one for a PID; a service's or framework's
    /// processes with their roles), parents before children.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessInfo>,
    /// What each conclusion rests on (file found, PID alive, pattern matched), in order.
    pub evidence: Vec<String>,
    /// Words that were not understood.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unrecognized: Vec<String>,
}

/// A job as its cluster engine describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterJob {
    /// `slurm`.
    pub engine: String,
    pub job_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The engine's word (`RUNNING`, `PENDING`).
    pub state: String,
    /// The engine's compressed node list (`gpu[01-04]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_list: Option<String>,
    /// The nodes, one name each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_nodes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_tasks: Option<u32>,
    /// The folder the job runs in (shared by its nodes on a cluster with a shared filesystem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<String>,
    /// Its running steps (Slurm's `squeue --steps`): `1234.0`, `1234.batch`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<JobStep>,
    /// The step named (`slurm 1234.0`): only its processes are observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// One running step of a job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobStep {
    /// `1234.0`, `1234.batch`.
    pub step_id: String,
    pub name: String,
    /// The engine's compressed node list.
    pub node_list: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u32>,
}

impl ClusterJob {
    /// What the observers on its nodes select processes by: the job, or `job.step` when a
    /// step was named.
    pub fn selector(&self) -> String {
        self.step.clone().unwrap_or_else(|| self.job_id.clone())
    }

    /// Its steps in words: `1234.0 `train` (2 tasks on n[1-2]), 1234.batch `batch``.
    pub fn steps_phrase(&self) -> String {
        self.steps
            .iter()
            .map(|s| match s.tasks {
                Some(1) => format!("{} `{}` (1 task on {})", s.step_id, s.name, s.node_list),
                Some(n) => format!("{} `{}` ({n} tasks on {})", s.step_id, s.name, s.node_list),
                None => format!("{} `{}` (on {})", s.step_id, s.name, s.node_list),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A cluster job in words: `Slurm job 1234`, `Ray job 02000000`, `the Ray cluster` (a Ray
/// target of every job).
pub fn job_phrase(engine: &str, job_id: &str) -> String {
    match engine {
        "slurm" => format!("Slurm job {job_id}"),
        "ray" if job_id.is_empty() || job_id == "cluster" => "the Ray cluster".into(),
        "ray" => format!("Ray job {job_id}"),
        other => format!("{other} job {job_id}"),
    }
}
