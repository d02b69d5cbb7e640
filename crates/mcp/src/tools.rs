//! The tool registry: every tool's name, title, description, annotations, JSON Schemas (2020-12,
//! from schemars) and the engine call behind it. `tools/list`, `tools/call`, the plain JSON-RPC
//! methods, `system-profile call` and `system-profile schemas` all read this one table.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};
use system_profile_engine::{Engine, EngineError, Progress};
use system_profile_model::detect::{DetectReport, DetectToolsInput};
use system_profile_model::instrument::{
    ChangeList, InstrumentFileInput, InstrumentRecord, InstrumentResult, Ledger, ListChangesInput,
    RevertChangesInput, RevertResult,
};
use system_profile_model::plan::{Plan, PlanProfileInput, TargetRef};
use system_profile_model::recipe::Recipe;
use system_profile_model::report::{
    CompareInput, CompareOutput, Report, ReportWritten, SummarizeInput, SummarizeOutput,
};
use system_profile_model::run::{
    CancelRunInput, GetRunInput, ListRunsInput, RunBrief, RunIndex, RunProfilerInput, RunRecord,
};
use system_profile_model::target::{IdentifyTargetInput, Target};
use system_profile_model::trace::{AnalyzeTraceInput, TraceReport};

/// What a client may assume about a tool (MCP `ToolAnnotations`).
#[derive(Debug, Clone, Copy)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    /// Reaches beyond this machine (network services).
    pub open_world: bool,
}

type CallFn =
    for<'a> fn(&'a Engine, Value, &'a Progress) -> BoxFuture<'a, Result<Value, ToolError>>;

/// One tool of the server.
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub annotations: Annotations,
    input_schema: fn() -> Value,
    output_schema: fn() -> Value,
    call: CallFn,
    /// The text content of a result (default: the JSON itself).
    text: fn(&Value) -> String,
    /// What `structuredContent` carries of the result, as `output_schema` says (default: the
    /// whole). A result stored whole elsewhere (a run record, a report) is given in brief so
    /// that `tools/list` does not serve its schema twice; the text and the resource links are
    /// made from the whole, and a plain JSON-RPC call of the tool answers with the whole.
    structured: fn(Value) -> Result<Value, ToolError>,
    /// `$defs` of the input that another tool's result fills whole (a `Target`): `tools/list`
    /// shows them as a plain object with this line, not their every field.
    opaque_inputs: &'static [(&'static str, &'static str)],
}

impl ToolDef {
    pub fn input_schema(&self) -> Value {
        (self.input_schema)()
    }

    pub fn output_schema(&self) -> Value {
        (self.output_schema)()
    }

    /// Run the tool on JSON arguments (`null` or absent means `{}`).
    pub async fn call(
        &self,
        engine: &Engine,
        arguments: Value,
        progress: &Progress,
    ) -> Result<Value, ToolError> {
        (self.call)(engine, arguments, progress).await
    }

    /// The result as the text content block carries it.
    pub fn text(&self, result: &Value) -> String {
        (self.text)(result)
    }

    /// The result as `structuredContent` carries it.
    pub fn structured(&self, result: Value) -> Result<Value, ToolError> {
        (self.structured)(result)
    }

    /// The tool as `tools/list` describes it: schemas sized for a model (see `lean`).
    pub fn describe(&self) -> Value {
        json!({
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": crate::lean::input(&self.input_schema(), self.opaque_inputs),
            "outputSchema": crate::lean::output(&self.output_schema()),
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.annotations.read_only,
                "destructiveHint": self.annotations.destructive,
                "idempotentHint": self.annotations.idempotent,
                "openWorldHint": self.annotations.open_world,
            },
        })
    }
}

/// Why a tool call failed.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    kind: ToolErrorKind,
    message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolErrorKind {
    /// The arguments do not fit the input schema; `field` names the culprit when there is one.
    InvalidArguments { field: Option<String> },
    /// The tool ran and failed (target crashed, tool missing, path refused).
    Failed,
}

impl ToolError {
    pub fn kind(&self) -> &ToolErrorKind {
        &self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    fn invalid(field: Option<String>, message: String) -> Self {
        ToolError {
            kind: ToolErrorKind::InvalidArguments { field },
            message,
        }
    }
}

impl From<EngineError> for ToolError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidInput { ref field, .. } => {
                ToolError::invalid(Some(field.to_string()), e.to_string())
            }
            EngineError::Failed { message } => ToolError {
                kind: ToolErrorKind::Failed,
                message,
            },
        }
    }
}

/// Decode arguments into `T`, naming the field that does not fit.
pub fn decode_arguments<T: DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    let arguments = match arguments {
        Value::Null => Value::Object(Map::new()),
        Value::Object(m) => Value::Object(m),
        other => {
            return Err(ToolError::invalid(
                None,
                format!(
                    "arguments must be a JSON object, not {}",
                    json_type_name(&other)
                ),
            ))
        }
    };
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names an unknown or missing field in its message but leaves the path at the
        // parent.
        let field = if path == "." {
            inner
                .strip_prefix("unknown field `")
                .or_else(|| inner.strip_prefix("missing field `"))
                .and_then(|rest| rest.split('`').next())
                .map(str::to_string)
        } else {
            Some(path)
        };
        let message = match &field {
            Some(f) => format!("invalid argument `{f}`: {inner}"),
            None => format!("invalid arguments: {inner}"),
        };
        ToolError::invalid(field, message)
    })
}

pub fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The JSON Schema (2020-12) of `T`, as a JSON value.
pub fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_else(|e| {
        // A schema that cannot be serialised is a bug in a model type; say so in the schema.
        json!({ "type": "object", "description": format!("schema unavailable: {e}") })
    });
    drop_rust_number_formats(&mut schema);
    schema
}

/// schemars marks Rust number types with formats JSON Schema does not define (`uint`,
/// `uint32`, `double`, ...); validators such as ajv warn on each. The bounds that matter
/// (`minimum: 0`) are kept as schema keywords.
fn drop_rust_number_formats(schema: &mut Value) {
    const RUST_FORMATS: [&str; 12] = [
        "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64",
        "float", "double",
    ];
    match schema {
        Value::Object(m) => {
            if matches!(m.get("format"), Some(Value::String(f)) if RUST_FORMATS.contains(&f.as_str()))
            {
                m.remove("format");
            }
            m.values_mut().for_each(drop_rust_number_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_rust_number_formats),
        _ => {}
    }
}

fn to_value<T: Serialize>(value: &T) -> Result<Value, ToolError> {
    serde_json::to_value(value).map_err(|e| ToolError {
        kind: ToolErrorKind::Failed,
        message: format!("could not encode the result: {e}"),
    })
}

/// A tool's call: decode the arguments into its input type (naming a bad field), run the
/// engine step, encode the result.
macro_rules! tool_call {
    ($name:ident, $input:ty, |$engine:ident, $arg:ident, $progress:ident| $run:expr) => {
        fn $name<'a>(
            $engine: &'a Engine,
            arguments: Value,
            $progress: &'a Progress,
        ) -> BoxFuture<'a, Result<Value, ToolError>> {
            Box::pin(async move {
                let $arg: $input = decode_arguments(arguments)?;
                let _ = $progress;
                to_value(&$run)
            })
        }
    };
}

tool_call!(
    detect_tools_call,
    DetectToolsInput,
    |engine, input, progress| engine.detect_tools(input, progress).await?
);

tool_call!(
    identify_target_call,
    IdentifyTargetInput,
    |engine, input, progress| engine.identify_target(input).await?
);

tool_call!(
    plan_profile_call,
    PlanProfileInput,
    |engine, input, progress| engine.plan_profile(input, progress).await?
);

tool_call!(
    run_profiler_call,
    RunProfilerInput,
    |engine, input, progress| engine.run_profiler(input, progress).await?
);

tool_call!(get_run_call, GetRunInput, |engine, input, progress| engine
    .get_run(input)
    .await?);

tool_call!(list_runs_call, ListRunsInput, |engine, input, progress| {
    RunIndex::from(&engine.list_runs(input))
});

tool_call!(
    cancel_run_call,
    CancelRunInput,
    |engine, input, progress| RunBrief::from(&engine.cancel_run(input)?)
);

tool_call!(
    analyze_trace_call,
    AnalyzeTraceInput,
    |engine, input, progress| engine.analyze_trace(input).await?
);

tool_call!(
    instrument_file_call,
    InstrumentFileInput,
    |engine, input, progress| engine.instrument_file(input).await?
);

tool_call!(
    list_changes_call,
    ListChangesInput,
    |engine, input, progress| engine.list_changes(input).await?
);

tool_call!(
    revert_changes_call,
    RevertChangesInput,
    |engine, input, progress| engine.revert_changes(input).await?
);

tool_call!(summarize_call, SummarizeInput, |engine, input, progress| {
    engine.summarize(input).await?
});

tool_call!(compare_call, CompareInput, |engine, input, progress| engine
    .compare(input)
    .await?);

fn whole(result: Value) -> Result<Value, ToolError> {
    Ok(result)
}

/// Re-read a tool's whole result as `T`, to give it in another shape.
fn as_type<T: DeserializeOwned>(result: Value) -> Result<T, ToolError> {
    serde_json::from_value(result).map_err(|e| ToolError {
        kind: ToolErrorKind::Failed,
        message: format!("could not re-read the result: {e}"),
    })
}

/// A run in brief; `get_run` has its record.
fn run_in_brief(result: Value) -> Result<Value, ToolError> {
    to_value(&RunBrief::from(&as_type::<RunRecord>(result)?))
}

/// The plan with its target by id: the client holds identify_target's answer.
fn plan_naming_its_target(mut result: Value) -> Result<Value, ToolError> {
    let target = as_type::<Target>(result["target"].take())?;
    result["target"] = to_value(&TargetRef::from(&target))?;
    // Checked as the schema says, so that a field added to `Plan` is not missed here.
    to_value(&as_type::<Plan<TargetRef>>(result)?)
}

/// The report's Markdown and files; its data is `report.json`.
fn report_in_its_files(result: Value) -> Result<Value, ToolError> {
    to_value(&ReportWritten::from(as_type::<SummarizeOutput>(result)?))
}

fn json_text(result: &Value) -> String {
    crate::brief::json_brief(result)
}

/// A report's text: its Markdown, or with `format: json` the report (or the deltas) as JSON.
/// The plan as its structured content gives it (its target by id): the model holds the target.
fn plan_text(result: &Value) -> String {
    match plan_naming_its_target(result.clone()) {
        Ok(plan) => crate::brief::plan_brief(&plan),
        Err(_) => json_text(result),
    }
}

fn report_text(result: &Value) -> String {
    if result["format"] == "json" {
        let data = result.get("report").unwrap_or(&result["deltas"]);
        let text = crate::brief::json_brief(data);
        // summarize's structuredContent names the report's file, which holds it whole.
        return match result["json_path"].as_str() {
            Some(path) => crate::brief::whole_is_in(text, path),
            None => text,
        };
    }
    match result["markdown"].as_str() {
        Some(md) => {
            crate::brief::markdown_brief(md, result["markdown_path"].as_str().unwrap_or(""))
        }
        None => crate::brief::json_brief(result),
    }
}

const READ_ONLY: Annotations = Annotations {
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
};

static TOOLS: [ToolDef; 13] = [
    ToolDef {
        name: "identify_target",
        title: "Identify the profiling target",
        description: "Step 1: what the user typed after /system-profile (a script, `pid N`, a service, a framework, torchrun …, focus words) as a target with a `target_id`. Unclear input: needs_clarification and questions.",
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        input_schema: schema_of::<IdentifyTargetInput>,
        output_schema: schema_of::<Target>,
        call: identify_target_call,
        text: json_text,
        structured: whole,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "detect_tools",
        title: "Detect profilers, hardware and permissions",
        description: "Which profilers, GPUs and permissions are usable here for the target's interpreter, or why not and the fix. Cached (refresh: true probes again).",
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        input_schema: schema_of::<DetectToolsInput>,
        output_schema: schema_of::<DetectReport>,
        call: detect_tools_call,
        text: crate::brief::detect_brief,
        structured: whole,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "plan_profile",
        title: "Plan the profile",
        description: "Step 2: the plan for a target (`target_id`, or the raw arguments) and focus: per step the method, why, overhead and the exact run_profiler arguments; skipped methods with their fix; instrument_file suggestions.",
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        input_schema: schema_of::<PlanProfileInput>,
        output_schema: schema_of::<Plan<TargetRef>>,
        call: plan_profile_call,
        text: plan_text,
        structured: plan_naming_its_target,
        opaque_inputs: &[("Target", "the whole target as identify_target returned it (target_id is shorter)")],
    },
    ToolDef {
        name: "run_profiler",
        title: "Run a profiler",
        description: "Step 5: run one method on a command, a PID or a `target_id`, with plan_profile's arguments; artifacts under profile_output/<session>/<run_id>/. Returns status, figures, warnings; background: true returns the run_id at once.",
        annotations: Annotations {
            read_only: false,
            destructive: false,
            idempotent: false,
            open_world: false,
        },
        input_schema: schema_of::<RunProfilerInput>,
        output_schema: schema_of::<RunBrief>,
        call: run_profiler_call,
        text: json_text,
        structured: run_in_brief,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "get_run",
        title: "Get a run",
        description: "A run by run_id: status, figures, artifacts, warnings. wait_s waits for it to end.",
        annotations: READ_ONLY,
        input_schema: schema_of::<GetRunInput>,
        output_schema: schema_of::<RunRecord>,
        call: get_run_call,
        text: json_text,
        structured: whole,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "list_runs",
        title: "List runs",
        description: "The session's runs in start order (optionally one status), one line each.",
        annotations: READ_ONLY,
        input_schema: schema_of::<ListRunsInput>,
        output_schema: schema_of::<RunIndex>,
        call: list_runs_call,
        text: json_text,
        structured: whole,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "cancel_run",
        title: "Cancel a run",
        description: "Stop a run: its whole process group is killed; returns the run in brief (status cancelled).",
        annotations: Annotations {
            read_only: false,
            destructive: true,
            idempotent: true,
            open_world: false,
        },
        input_schema: schema_of::<CancelRunInput>,
        output_schema: schema_of::<RunBrief>,
        call: cancel_run_call,
        text: json_text,
        structured: whole,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "analyze_trace",
        title: "Analyse PyTorch profiler traces",
        description: "Kineto traces (torch.profiler, vLLM; one per rank): GPU busy/idle, kernels, copies, launch overhead, collectives and overlap, rank balance and stragglers.",
        annotations: READ_ONLY,
        input_schema: schema_of::<AnalyzeTraceInput>,
        output_schema: schema_of::<TraceReport>,
        call: analyze_trace_call,
        text: json_text,
        structured: whole,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "instrument_file",
        title: "Insert measurement code",
        description: "Step 4: measure what profilers cannot see (a block's time, CUDA time, CPU-GPU transfers, GPU memory, duplicated tensors, collectives) with marked code in a Python file (runner: file untouched). Ledgered; revert_changes undoes it.",
        annotations: Annotations {
            read_only: false,
            destructive: false,
            idempotent: false,
            open_world: false,
        },
        input_schema: schema_of::<InstrumentFileInput>,
        output_schema: schema_of::<InstrumentResult>,
        call: instrument_file_call,
        text: json_text,
        structured: whole,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "list_changes",
        title: "List instrumentation changes",
        description: "The change ledger (Part B): every file created or modified for the profile.",
        annotations: READ_ONLY,
        input_schema: schema_of::<ListChangesInput>,
        output_schema: schema_of::<ChangeList>,
        call: list_changes_call,
        text: json_text,
        structured: whole,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "revert_changes",
        title: "Undo instrumentation changes",
        description: "Undo ledger changes (all: true, or ids), verified byte for byte; a file edited since is merged three-way or reported as a conflict.",
        annotations: Annotations {
            read_only: false,
            destructive: true,
            idempotent: true,
            open_world: false,
        },
        input_schema: schema_of::<RevertChangesInput>,
        output_schema: schema_of::<RevertResult>,
        call: revert_changes_call,
        text: json_text,
        structured: whole,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "summarize",
        title: "Write the profile report",
        description: "Step 6: the session's report (en or ja): CPU, memory, interconnect, GPU and hotspot tables citing runs, recommendations by impact, Part B (the change log). Writes report.md and report.json.",
        annotations: Annotations {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        input_schema: schema_of::<SummarizeInput>,
        output_schema: schema_of::<ReportWritten>,
        call: summarize_call,
        text: report_text,
        structured: report_in_its_files,
        opaque_inputs: &[],
    },
    ToolDef {
        name: "compare",
        title: "Compare two profiles",
        description: "Before and after a fix: two sessions' figures side by side, each delta judged against run-to-run noise.",
        annotations: Annotations {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        input_schema: schema_of::<CompareInput>,
        output_schema: schema_of::<CompareOutput>,
        call: compare_call,
        text: report_text,
        structured: whole,
        opaque_inputs: &[],
    },
];

/// Every tool, in the fixed order `tools/list` gives.
pub fn tools() -> &'static [ToolDef] {
    &TOOLS
}

/// Every tool as `tools/list` describes it, built once: schema generation is the costly part
/// of answering `tools/list`.
pub fn described() -> &'static [Value] {
    static DESCRIBED: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    DESCRIBED.get_or_init(|| tools().iter().map(ToolDef::describe).collect())
}

/// The tools' names, comma-separated, for messages that say which tools exist.
pub fn names() -> String {
    let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
    names.join(", ")
}

pub fn find(name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The files `system-profile schemas` writes: `<tool>.input.json` and `<tool>.output.json` for
/// every tool, `recipe.json` for recipe authors, `instrument_record.json` (a line of the
/// instrumentation log), `ledger.json` and `report.json` (summarize's report.json); pretty-printed with a final newline, in a
/// fixed order.
pub fn schema_files() -> Vec<(String, String)> {
    let pretty = |schema: Value| {
        let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        text.push('\n');
        text
    };
    let mut files = Vec::new();
    for tool in tools() {
        for (suffix, schema) in [
            ("input", tool.input_schema()),
            ("output", tool.output_schema()),
        ] {
            files.push((format!("{}.{suffix}.json", tool.name), pretty(schema)));
        }
    }
    files.push(("recipe.json".into(), pretty(schema_of::<Recipe>())));
    files.push((
        "instrument_record.json".into(),
        pretty(schema_of::<InstrumentRecord>()),
    ));
    files.push(("ledger.json".into(), pretty(schema_of::<Ledger>())));
    files.push(("report.json".into(), pretty(schema_of::<Report>())));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_name_the_field() {
        let err =
            decode_arguments::<DetectToolsInput>(json!({"probe_timeout_s": "fast"})).unwrap_err();
        assert_eq!(
            err.kind(),
            &ToolErrorKind::InvalidArguments {
                field: Some("probe_timeout_s".into())
            }
        );
        assert!(err.message().contains("`probe_timeout_s`"), "{err}");
        let err = decode_arguments::<DetectToolsInput>(json!({"pyhton": "python3"})).unwrap_err();
        assert_eq!(
            err.kind(),
            &ToolErrorKind::InvalidArguments {
                field: Some("pyhton".into())
            }
        );
        let err = decode_arguments::<DetectToolsInput>(json!([1])).unwrap_err();
        assert!(err.message().contains("an array"), "{err}");
        let ok: DetectToolsInput = decode_arguments(Value::Null).unwrap();
        assert_eq!(ok, DetectToolsInput::default());
    }

    #[test]
    fn schemas_are_2020_12_objects() {
        for tool in tools() {
            for schema in [tool.input_schema(), tool.output_schema()] {
                assert_eq!(
                    schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
                    "{}",
                    tool.name
                );
                assert_eq!(schema["type"], "object", "{}", tool.name);
                let text = schema.to_string();
                assert!(!text.contains(r#""format":"uint"#), "{}", tool.name);
                assert!(!text.contains(r#""format":"double""#), "{}", tool.name);
            }
        }
    }
}
