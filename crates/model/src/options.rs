//! The options a method reads (`ProfilerOptions`), each field named by an [`OptionName`] so that
//! a method's spec lists those it reads: the planner keeps only those in a step, and the
//! schema says for each field which methods read it.

use crate::run::Method;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Options a method reads; unset means the method's default. Which methods read each is their
/// `MethodSpec`'s `options`, added to each field's description in the schema.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = name_readers)]
pub struct ProfilerOptions {
    /// Samples per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.1, max = 10000.0))]
    pub rate_hz: Option<f64>,
    /// Seconds between reports (sysstat tools, nvidia-smi) or snapshots (tracemalloc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.01, max = 3600.0))]
    pub interval_s: Option<f64>,
    /// Most bytes of the target's stdout and of its stderr kept on disk (`stdout.txt`,
    /// `stderr.txt`: the first bytes; the last 64 KiB are in the record's tails whatever the
    /// size); default 1 GiB each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_cap_bytes: Option<u64>,
    /// Include native (C/C++) frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<bool>,
    /// Follow child processes; default: yes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subprocesses: Option<bool>,
    /// Only samples holding the GIL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gil: Option<bool>,
    /// Keep idle threads' samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<bool>,
    /// Seconds of the server's own profiler (vLLM's) after the serving window, under the same
    /// load; 0: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 600.0))]
    pub engine_profile_s: Option<f64>,
    /// Events to count or sample.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// The function to profile line by line, as `file.py:qualname` or `pkg.mod:qualname`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Frames kept per allocation traceback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub traceback_depth: Option<u32>,
    /// Count every allocation pymalloc serves (memray's `--trace-python-allocators`); default:
    /// yes. Without it only pymalloc's arenas are seen, so the sites rank where arenas were
    /// requested, not where Python objects are made; off keeps a long run's capture small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_allocators: Option<bool>,
    /// memray: read the large allocations freed soon after (a pass over the capture, often
    /// its longest); `false` leaves them out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_lived: Option<bool>,
    /// Report leaks: memory not freed at exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaks: Option<bool>,
    /// Draw memray's flame graph over time (`--temporal`): the allocations live in a time
    /// range chosen in the page, for memory that grows and shrinks in phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temporal: Option<bool>,
    /// Column groups (`nvidia-smi dmon -s`, e.g. `pucvmet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dmon_columns: Option<String>,
    /// Fields (`nvidia-smi --query-gpu=`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query_fields: Vec<String>,
    /// `NCCL_DEBUG_SUBSYS`, e.g. `INIT,COLL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_subsys: Option<String>,
    /// Record input shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_shapes: Option<bool>,
    /// Profile memory too (Scalene: `false` profiles CPU only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_memory: Option<bool>,
    /// Record the Python stack of each op.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_stack: Option<bool>,
    /// torch.profiler schedule when the target has a step loop: wait, warmup, active steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<TorchSchedule>,
    /// What `nsys profile --trace` records, e.g. `cuda`, `nvtx`, `osrt`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nsys_trace: Vec<String>,
    /// Sample the GPUs while the target runs: on by default where NVML answers;
    /// `false` turns it off, `true` makes its absence a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<bool>,
    /// Methods that observe this same run from outside without changing it, so the program
    /// runs once for all: `py_spy_record` (attached by PID, non-blocking: it never pauses the
    /// program) and `perf_stat` (counting the started command's tree). Their metrics and
    /// files are in this run's record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<Method>,
    /// GPU indices to sample; empty means every GPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<u32>,
}

/// A switch of the profilers asked for by a word of the target (`train.py idle native`): set on
/// every planned step whose method reads it, over the recipe's own value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AskedOption {
    /// Keep idle threads' samples (py-spy `--idle`): time blocked in calls, by call.
    Idle,
    /// Only samples holding the GIL (py-spy `--gil`): Python code running, not waiting.
    Gil,
    /// Native (C/C++) frames (py-spy, memray `--native`): where in an extension time goes.
    Native,
    /// Memory not freed at exit (memray's leak view).
    Leaks,
    /// memray's flame graph over time (`--temporal`).
    Temporal,
}

impl AskedOption {
    /// The words that ask for each, as typed after the target.
    pub const WORDS: [(&'static str, AskedOption); 8] = [
        ("idle", AskedOption::Idle),
        ("gil", AskedOption::Gil),
        ("native", AskedOption::Native),
        ("leak", AskedOption::Leaks),
        ("leaks", AskedOption::Leaks),
        ("リーク", AskedOption::Leaks),
        ("temporal", AskedOption::Temporal),
        ("時系列", AskedOption::Temporal),
    ];

    pub fn option(self) -> OptionName {
        match self {
            AskedOption::Idle => OptionName::Idle,
            AskedOption::Gil => OptionName::Gil,
            AskedOption::Native => OptionName::Native,
            AskedOption::Leaks => OptionName::Leaks,
            AskedOption::Temporal => OptionName::Temporal,
        }
    }

    /// Turn it on in `o`.
    pub fn set(self, o: &mut ProfilerOptions) {
        match self {
            AskedOption::Idle => o.idle = Some(true),
            AskedOption::Gil => o.gil = Some(true),
            AskedOption::Native => o.native = Some(true),
            AskedOption::Leaks => o.leaks = Some(true),
            AskedOption::Temporal => o.temporal = Some(true),
        }
    }
}

/// torch.profiler's schedule: the step range traced (after `wait` and `warmup` steps,
/// `active` steps, `repeat` times).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TorchSchedule {
    pub wait: u32,
    pub warmup: u32,
    pub active: u32,
    #[serde(default = "one")]
    pub repeat: u32,
    /// What the program does once the last active steps are traced.
    #[serde(default, skip_serializing_if = "AfterTrace::is_run_on")]
    pub after_trace: AfterTrace,
}

/// What a traced program does after its schedule's last active steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AfterTrace {
    /// It runs to its own end.
    #[default]
    RunOn,
    /// It is ended there (exit status 0): the run costs start-up and the window's steps, not
    /// the whole training, and its wall and outputs are not the program's.
    EndProgram,
}

impl AfterTrace {
    pub fn is_run_on(&self) -> bool {
        *self == AfterTrace::RunOn
    }
}

fn one() -> u32 {
    1
}

/// One field of [`ProfilerOptions`]; its wire name is the field's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionName {
    RateHz,
    IntervalS,
    OutputCapBytes,
    Native,
    Subprocesses,
    Gil,
    Idle,
    EngineProfileS,
    Events,
    Function,
    TracebackDepth,
    Leaks,
    Temporal,
    PythonAllocators,
    ShortLived,
    DmonColumns,
    QueryFields,
    NcclSubsys,
    RecordShapes,
    ProfileMemory,
    WithStack,
    Schedule,
    NsysTrace,
    Gpu,
    Gpus,
    Observers,
}

impl OptionName {
    pub const ALL: [OptionName; 26] = [
        OptionName::RateHz,
        OptionName::IntervalS,
        OptionName::OutputCapBytes,
        OptionName::Native,
        OptionName::Subprocesses,
        OptionName::Gil,
        OptionName::Idle,
        OptionName::EngineProfileS,
        OptionName::Events,
        OptionName::Function,
        OptionName::TracebackDepth,
        OptionName::Leaks,
        OptionName::Temporal,
        OptionName::PythonAllocators,
        OptionName::ShortLived,
        OptionName::DmonColumns,
        OptionName::QueryFields,
        OptionName::NcclSubsys,
        OptionName::RecordShapes,
        OptionName::ProfileMemory,
        OptionName::WithStack,
        OptionName::Schedule,
        OptionName::NsysTrace,
        OptionName::Gpu,
        OptionName::Gpus,
        OptionName::Observers,
    ];

    /// Its wire name: the `ProfilerOptions` field's (`idle`, `rate_hz`).
    pub fn wire_name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// The methods that read it. `output_cap_bytes` is read wherever a program is started,
    /// and is in no spec.
    pub fn readers(self) -> Vec<Method> {
        Method::ALL
            .into_iter()
            .filter(|m| m.spec().options.contains(&self))
            .collect()
    }
}

impl ProfilerOptions {
    /// These options with only `names` kept (and `output_cap_bytes`, which every started
    /// program reads); the others unset.
    pub fn keep_only(&self, names: &[OptionName]) -> ProfilerOptions {
        let mut o = ProfilerOptions {
            output_cap_bytes: self.output_cap_bytes,
            ..Default::default()
        };
        for name in names {
            match name {
                OptionName::RateHz => o.rate_hz = self.rate_hz,
                OptionName::IntervalS => o.interval_s = self.interval_s,
                OptionName::OutputCapBytes => {}
                OptionName::Native => o.native = self.native,
                OptionName::Subprocesses => o.subprocesses = self.subprocesses,
                OptionName::Gil => o.gil = self.gil,
                OptionName::Idle => o.idle = self.idle,
                OptionName::EngineProfileS => o.engine_profile_s = self.engine_profile_s,
                OptionName::Events => o.events = self.events.clone(),
                OptionName::Function => o.function = self.function.clone(),
                OptionName::TracebackDepth => o.traceback_depth = self.traceback_depth,
                OptionName::Leaks => o.leaks = self.leaks,
                OptionName::Temporal => o.temporal = self.temporal,
                OptionName::PythonAllocators => o.python_allocators = self.python_allocators,
                OptionName::ShortLived => o.short_lived = self.short_lived,
                OptionName::DmonColumns => o.dmon_columns = self.dmon_columns.clone(),
                OptionName::QueryFields => o.query_fields = self.query_fields.clone(),
                OptionName::NcclSubsys => o.nccl_subsys = self.nccl_subsys.clone(),
                OptionName::RecordShapes => o.record_shapes = self.record_shapes,
                OptionName::ProfileMemory => o.profile_memory = self.profile_memory,
                OptionName::WithStack => o.with_stack = self.with_stack,
                OptionName::Schedule => o.schedule = self.schedule,
                OptionName::NsysTrace => o.nsys_trace = self.nsys_trace.clone(),
                OptionName::Gpu => o.gpu = self.gpu,
                OptionName::Gpus => o.gpus = self.gpus.clone(),
                OptionName::Observers => o.observers = self.observers.clone(),
            }
        }
        o
    }
}

/// Say in each option's description which methods read it, from their specs: `(read by
/// py_spy_record, perf_record)` at the end of its first sentence.
fn name_readers(schema: &mut schemars::Schema) {
    let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) else {
        return;
    };
    for (field, prop) in props.iter_mut() {
        let Ok(name) = serde_json::from_value::<OptionName>(field.as_str().into()) else {
            continue;
        };
        let readers: Vec<String> = name.readers().into_iter().map(Method::id).collect();
        if readers.is_empty() {
            continue;
        }
        let Some(obj) = prop.as_object_mut() else {
            continue;
        };
        let description = obj
            .get("description")
            .and_then(|d| d.as_str())
            .unwrap_or_default()
            .to_string();
        let end = description
            .find(". ")
            .or_else(|| description.strip_suffix('.').map(str::len))
            .unwrap_or(description.len());
        let described = format!(
            "{} (read by {}){}",
            &description[..end],
            readers.join(", "),
            &description[end..]
        );
        obj.insert("description".into(), described.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::TorchSchedule;

    /// Every field set: a field added without an `OptionName` fails to compile here, and one
    /// whose name `keep_only` forgets fails the assertion.
    fn every_field_set() -> ProfilerOptions {
        ProfilerOptions {
            rate_hz: Some(1.0),
            interval_s: Some(2.0),
            output_cap_bytes: Some(3),
            native: Some(true),
            subprocesses: Some(false),
            gil: Some(true),
            idle: Some(true),
            engine_profile_s: Some(2.0),
            events: vec!["cycles".into()],
            function: Some("a.py:f".into()),
            traceback_depth: Some(4),
            leaks: Some(true),
            temporal: Some(true),
            python_allocators: Some(false),
            short_lived: Some(false),
            dmon_columns: Some("pu".into()),
            query_fields: vec!["index".into()],
            nccl_subsys: Some("INIT".into()),
            record_shapes: Some(true),
            profile_memory: Some(false),
            with_stack: Some(true),
            schedule: Some(TorchSchedule {
                wait: 1,
                warmup: 1,
                active: 1,
                repeat: 1,
                after_trace: Default::default(),
            }),
            nsys_trace: vec!["cuda".into()],
            gpu: Some(true),
            gpus: vec![0],
            observers: vec![crate::run::Method::PySpyRecord],
        }
    }

    #[test]
    fn keep_only_keeps_each_named_field_and_nothing_else() {
        let all = every_field_set();
        assert_eq!(all.keep_only(&OptionName::ALL), all);
        let none = all.keep_only(&[]);
        assert_eq!(
            none,
            ProfilerOptions {
                output_cap_bytes: Some(3),
                ..Default::default()
            }
        );
        // Each name keeps exactly one field: its wire name's.
        for name in OptionName::ALL {
            let kept = serde_json::to_value(all.keep_only(&[name])).unwrap();
            let mut fields: Vec<&String> = kept.as_object().unwrap().keys().collect();
            fields.retain(|f| *f != "output_cap_bytes");
            let wire = crate::wire_name(&name);
            if name == OptionName::OutputCapBytes {
                assert!(fields.is_empty(), "{fields:?}");
            } else {
                assert_eq!(fields, vec![&wire], "{name:?}");
            }
        }
    }

    #[test]
    fn the_schema_names_each_options_readers() {
        let schema = serde_json::to_value(schemars::schema_for!(ProfilerOptions)).unwrap();
        let d = schema["properties"]["traceback_depth"]["description"]
            .as_str()
            .unwrap();
        assert_eq!(
            d,
            "Frames kept per allocation traceback (read by tracemalloc)."
        );
        let d = schema["properties"]["rate_hz"]["description"]
            .as_str()
            .unwrap();
        assert!(
            d.contains("py_spy_record") && d.contains("perf_record"),
            "{d}"
        );
    }
}
