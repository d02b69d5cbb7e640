//! The recipe file format (`recipes/<id>.toml`): how to recognise a framework or kind of target
//! and what to measure on it. Adding a framework means adding one such file; its JSON Schema is
//! `schemas/recipe.json`.

use crate::instrument::{Measure, Strategy};
use crate::run::{Method, MetricFamily, ProfilerOptions};
use crate::target::{Focus, TargetKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Equal to the file's stem.
    pub id: String,
    pub name: String,
    pub description: String,
    /// A framework the user can name, or a generic recipe chosen by the target's kind.
    pub role: RecipeRole,
    /// Generic recipes: the target kinds they serve. Framework recipes: empty.
    #[serde(default)]
    pub applies_to: Vec<TargetKind>,
    /// Generic recipes: serve only Python targets (`true`), only non-Python ones (`false`), or
    /// both (absent).
    #[serde(default)]
    pub python: Option<bool>,
    /// Phrases of the arguments that name it (lower case; "vllm serving", "学習").
    #[serde(default)]
    pub words: Vec<String>,
    /// How a script, command or process is recognised as this framework.
    #[serde(default)]
    pub select: Select,
    /// Its Python distribution, for the version.
    #[serde(default)]
    pub package: Option<String>,
    /// Its processes talk to each other over NCCL whatever the machine (DDP): GPU-to-GPU
    /// metrics apply even before the GPU count is known.
    #[serde(default)]
    pub distributed: bool,
    /// The cluster engine it can run on (`ray`): named by its words alone, when that engine
    /// reports its actors on two nodes or more, the target is that cluster's job, observed on
    /// every node, not this machine's processes.
    #[serde(default)]
    pub cluster_engine: Option<String>,
    /// Focus when none is named.
    pub default_focus: Vec<Focus>,
    /// How it is usually started.
    #[serde(default)]
    pub entry_points: Vec<String>,
    #[serde(default)]
    pub components: Vec<Component>,
    #[serde(default)]
    pub facts: Vec<Fact>,
    pub steps: Vec<Step>,
    #[serde(default)]
    pub instrument: Vec<InstrumentRule>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecipeRole {
    Framework,
    Generic,
}

/// Signals that a target belongs to the framework (any one is enough; more make a better match).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Select {
    /// Top-level packages a script imports (`torch`).
    #[serde(default)]
    pub imports: Vec<String>,
    /// Calls the script makes, of which at least one is needed when `imports` match
    /// (`backward`, `init_process_group`). Empty: the import alone selects.
    #[serde(default)]
    pub calls: Vec<String>,
    /// Program names of a command (`torchrun`, `vllm`).
    #[serde(default)]
    pub programs: Vec<String>,
    /// Wins over recipes of lower priority that match the same target (torch_ddp over
    /// torch_training: a DDP script is also a training script).
    #[serde(default)]
    pub priority: i32,
}

/// A part of the system and how its processes are recognised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Component {
    pub name: String,
    pub description: String,
    /// Substrings of the space-joined command line (case-insensitive).
    #[serde(default)]
    pub cmdline: Vec<String>,
    /// Also the children of this component's processes (torchrun's ranks keep a plain
    /// `python train.py` command line).
    #[serde(default)]
    pub children_of: Option<String>,
}

/// A fact read from a component's command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    pub name: String,
    /// Flags whose value is the fact (`--port 8000` or `--port=8000`).
    #[serde(default)]
    pub flags: Vec<String>,
    /// Words whose next argument is the fact (`serve <model>`).
    #[serde(default)]
    pub after: Vec<String>,
    #[serde(default)]
    pub default: Option<String>,
}

/// How often a step runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Per {
    /// Once, against the target (started, or its main process).
    #[default]
    Target,
    /// Once per running process of the target (optionally of some components).
    Process,
    /// Once, observing the whole machine.
    Machine,
    /// Once, running the step's own `command` (a load generator, a restart with profiling on).
    Command,
}

/// Conditions on a step; all must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// An NVIDIA GPU is present (`true`) or absent (`false`).
    #[serde(default)]
    pub gpu: Option<bool>,
    /// More than one GPU.
    #[serde(default)]
    pub multi_gpu: Option<bool>,
    /// The target's processes are running (`true`) or not (`false`).
    #[serde(default)]
    pub running: Option<bool>,
    /// Facts that must exceed a number (`tensor_parallel = 1`).
    #[serde(default)]
    pub fact_above: BTreeMap<String, f64>,
    /// The package's version is at least this (`0.13`).
    #[serde(default)]
    pub package_at_least: Option<String>,
    /// The package's version is below this.
    #[serde(default)]
    pub package_below: Option<String>,
    /// The target is Python.
    #[serde(default)]
    pub python: Option<bool>,
    /// The target names a function or block.
    #[serde(default)]
    pub function: Option<bool>,
}

/// One measurement of a recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub name: String,
    /// The name in Japanese: runs planned with `lang: "ja"` are labelled with it.
    pub name_ja: String,
    /// Methods in order of preference; the first that can run here is used.
    pub methods: Vec<Method>,
    #[serde(default)]
    pub per: Per,
    /// With `per = "process"`: only these components' processes.
    #[serde(default)]
    pub components: Vec<String>,
    /// The step applies when the plan's focus includes one of these; empty: always.
    #[serde(default)]
    pub focus: Vec<Focus>,
    #[serde(default)]
    pub when: When,
    pub why: String,
    #[serde(default)]
    pub options: ProfilerOptions,
    /// Observation time (attach and machine steps); the budget may shorten it.
    #[serde(default)]
    pub duration_s: Option<f64>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// With `per = "command"`: the argv, with `{fact}`, `{profile_output}` and
    /// `{argv:<component>}` (the component's running command line) filled in.
    #[serde(default)]
    pub command: Vec<String>,
    /// Run in the background while the named step runs.
    #[serde(default)]
    pub alongside: Option<String>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// Metric families the step yields beyond its method's own (a `custom` step that restarts
    /// a server with its own profiler on).
    #[serde(default)]
    pub yields: Vec<MetricFamily>,
}

/// When to suggest measurement code, and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstrumentRule {
    pub measure: Measure,
    pub strategy: Strategy,
    /// Suggest it for the functions that call one of these (from the file's syntax tree);
    /// empty: for the target's own function or block.
    #[serde(default)]
    pub calls: Vec<String>,
    #[serde(default)]
    pub focus: Vec<Focus>,
    #[serde(default)]
    pub when: When,
    pub why: String,
    #[serde(default)]
    pub sample_every: Option<u32>,
}
