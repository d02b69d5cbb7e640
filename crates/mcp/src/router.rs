//! The method router: one jsonrpsee `RpcModule` holding the MCP methods (`initialize`, `ping`,
//! `server/discover`, `tools/list`, `tools/call`, `prompts/list`, `prompts/get`,
//! `resources/list`, `resources/read`) and every tool as a plain JSON-RPC method of
//! its own name. Both transports (our stdio loop and jsonrpsee's WebSocket/HTTP server) serve
//! this same module.

use crate::cx;
use crate::protocol::{
    self, capabilities, error, finish_result, invalid_params, negotiate_handshake, server_info,
    supported_versions, CacheHint, Era, RequestMeta, INSTRUCTIONS,
};
use crate::tools::{self, json_type_name, ToolDef, ToolErrorKind};
use crate::{prompts, resources};
use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::RpcModule;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use system_profile_engine::Engine;

/// JSON-RPC server error for a plain method whose tool failed (the MCP form is `isError`).
pub const TOOL_FAILED: i32 = -32000;

/// How long a 2026-07-28 client may cache `tools/list` and `server/discover`: the tool set
/// does not change while the server runs.
const LIST_CACHE: CacheHint = CacheHint {
    ttl_ms: 3_600_000,
    public: true,
};

pub struct ServerState {
    pub engine: Arc<Engine>,
}

/// Artifacts are written while the session runs (a report is rewritten by each summarize): a
/// 2026-07-28 client must ask again rather than cache.
const ARTIFACT_CACHE: CacheHint = CacheHint {
    ttl_ms: 0,
    public: false,
};

type Answer = Result<Value, ErrorObjectOwned>;

/// A method answered at once, from its params alone.
type SyncHandler = fn(&Params<'_>) -> Answer;

/// The request's params as a JSON object (absent means empty). Positional params are refused:
/// every method here takes named fields.
fn params_object(params: &Params<'_>) -> Result<Map<String, Value>, ErrorObjectOwned> {
    let Some(raw) = params.as_str() else {
        return Ok(Map::new());
    };
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(invalid_params(format!(
            "params must be an object, not {}",
            json_type_name(&other)
        ))),
        Err(e) => Err(invalid_params(format!("params are not valid JSON: {e}"))),
    }
}

/// Read params and their `_meta` (era, progress token) together.
fn read_request(
    params: &Params<'_>,
) -> Result<(Map<String, Value>, RequestMeta), ErrorObjectOwned> {
    let object = params_object(params)?;
    let meta = RequestMeta::read(object.get("_meta"))?;
    Ok((object, meta))
}

/// The string param `field`, or -32602 naming it (`what` says what it is for when missing).
fn string_field<'a>(
    p: &'a Map<String, Value>,
    field: &str,
    what: &str,
) -> Result<&'a str, ErrorObjectOwned> {
    match p.get(field) {
        Some(Value::String(v)) => Ok(v),
        Some(other) => Err(invalid_params(format!(
            "`{field}` must be a string, not {}",
            json_type_name(other)
        ))),
        None => Err(invalid_params(format!("missing `{field}`: {what}"))),
    }
}

fn initialize(params: &Params<'_>) -> Answer {
    let (p, _) = read_request(params)?;
    let requested = string_field(
        &p,
        "protocolVersion",
        "send the MCP version the client speaks, e.g. \"2025-11-25\"",
    )?;
    Ok(json!({
        "protocolVersion": negotiate_handshake(requested),
        "capabilities": capabilities(),
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    }))
}

fn ping(params: &Params<'_>) -> Answer {
    let (_, meta) = read_request(params)?;
    Ok(finish_result(Map::new(), meta.era, None))
}

fn discover(params: &Params<'_>) -> Answer {
    // Read for its checks: a version we do not speak is -32022 here as everywhere.
    read_request(params)?;
    let mut body = Map::new();
    body.insert("supportedVersions".into(), json!(supported_versions()));
    body.insert("capabilities".into(), capabilities());
    body.insert("serverInfo".into(), server_info());
    body.insert("instructions".into(), json!(INSTRUCTIONS));
    // discover is a 2026-07-28 method: its result has that era's shape whatever the request said.
    Ok(finish_result(body, Era::Modern, Some(LIST_CACHE)))
}

fn tools_list(params: &Params<'_>) -> Answer {
    let (p, meta) = read_request(params)?;
    if let Some(cursor) = p.get("cursor").filter(|c| !c.is_null()) {
        return Err(invalid_params(format!(
            "unknown `cursor` {cursor}: tools/list returns every tool in one page"
        )));
    }
    let mut body = Map::new();
    body.insert("tools".into(), Value::Array(tools::described().to_vec()));
    Ok(finish_result(body, meta.era, Some(LIST_CACHE)))
}

async fn tools_call(params: Params<'static>, state: Arc<ServerState>) -> Answer {
    let (mut p, meta) = read_request(&params)?;
    let name = string_field(&p, "name", "the tool to call")?;
    let Some(tool) = tools::find(name) else {
        return Err(invalid_params(format!(
            "unknown tool `{name}` in `name`; tools/list names them: {}",
            tools::names()
        )));
    };
    let mut arguments = p.remove("arguments").unwrap_or(Value::Null);
    // `detail` is the protocol's, not the tool's: "brief" (the default) sizes the text for a
    // model, "full" gives the whole result as text.
    let full = match arguments.as_object_mut().and_then(|m| m.remove("detail")) {
        None => false,
        Some(Value::String(d)) if d == "brief" => false,
        Some(Value::String(d)) if d == "full" => true,
        Some(other) => {
            // Like any argument that does not fit: a result the model reads, not a protocol
            // error.
            let mut body = Map::new();
            let message =
                format!("`detail` must be \"brief\" (the default) or \"full\", not {other}");
            body.insert(
                "content".into(),
                json!([{ "type": "text", "text": message }]),
            );
            body.insert("isError".into(), json!(true));
            return Ok(finish_result(body, meta.era, None));
        }
    };
    let progress = cx::progress_for(&meta);
    let mut body = Map::new();
    match tool.call(&state.engine, arguments, &progress).await {
        Ok(value) => {
            let text = if full {
                crate::brief::full_text(&value)
            } else {
                tool.text(&value)
            };
            let mut content = vec![json!({ "type": "text", "text": text })];
            content.extend(resources::links(&state.engine.config().root, &value));
            match tool.structured(value) {
                Ok(structured) => {
                    body.insert("content".into(), Value::Array(content));
                    body.insert("structuredContent".into(), structured);
                    body.insert("isError".into(), json!(false));
                }
                Err(e) => {
                    body.insert(
                        "content".into(),
                        json!([{ "type": "text", "text": e.message() }]),
                    );
                    body.insert("isError".into(), json!(true));
                }
            }
        }
        // Argument and execution failures are tool results, so the model can read and retry.
        Err(e) => {
            body.insert(
                "content".into(),
                json!([{ "type": "text", "text": e.message() }]),
            );
            body.insert("isError".into(), json!(true));
        }
    }
    Ok(finish_result(body, meta.era, None))
}

fn prompts_list(params: &Params<'_>) -> Answer {
    let (p, meta) = read_request(params)?;
    if let Some(cursor) = p.get("cursor").filter(|c| !c.is_null()) {
        return Err(invalid_params(format!(
            "unknown `cursor` {cursor}: prompts/list returns every prompt in one page"
        )));
    }
    let mut body = Map::new();
    body.insert("prompts".into(), json!([prompts::listed()]));
    Ok(finish_result(body, meta.era, Some(LIST_CACHE)))
}

fn prompts_get(params: &Params<'_>) -> Answer {
    let (p, meta) = read_request(params)?;
    let name = string_field(&p, "name", "the prompt to get (prompts/list names it)")?;
    if name != prompts::PROMPT_NAME {
        return Err(invalid_params(format!(
            "unknown prompt `{name}` in `name`: the one prompt is `{}`",
            prompts::PROMPT_NAME
        )));
    }
    let target = match p.get("arguments") {
        None | Some(Value::Null) => "",
        Some(Value::Object(a)) => match a.get(prompts::ARGUMENT) {
            None | Some(Value::Null) => "",
            Some(Value::String(t)) => t.as_str(),
            Some(other) => {
                return Err(invalid_params(format!(
                    "`arguments.{}` must be a string, not {}",
                    prompts::ARGUMENT,
                    json_type_name(other)
                )))
            }
        },
        Some(other) => {
            return Err(invalid_params(format!(
                "`arguments` must be an object such as {{\"{}\": \"train.py\"}}, not {}",
                prompts::ARGUMENT,
                json_type_name(other)
            )))
        }
    };
    let Value::Object(body) = prompts::get(target) else {
        unreachable!("prompts::get builds an object")
    };
    Ok(finish_result(body, meta.era, None))
}

async fn resources_list(params: Params<'static>, state: Arc<ServerState>) -> Answer {
    let (p, meta) = read_request(&params)?;
    let cursor = match p.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(other) => {
            return Err(invalid_params(format!(
                "`cursor` must be a string, not {}",
                json_type_name(other)
            )))
        }
    };
    let root = state.engine.config().root.clone();
    let listed = tokio::task::spawn_blocking(move || resources::list(&root, cursor.as_deref()))
        .await
        .map_err(|e| error(protocol::INTERNAL_ERROR, e.to_string(), None))??;
    let Value::Object(body) = listed else {
        unreachable!("resources::list builds an object")
    };
    Ok(finish_result(body, meta.era, Some(ARTIFACT_CACHE)))
}

async fn resources_read(params: Params<'static>, state: Arc<ServerState>) -> Answer {
    let (p, meta) = read_request(&params)?;
    let uri =
        string_field(&p, "uri", "the resource's URI, as resources/list gives it")?.to_string();
    let root = state.engine.config().root.clone();
    let read = tokio::task::spawn_blocking(move || resources::read(&root, &uri))
        .await
        .map_err(|e| error(protocol::INTERNAL_ERROR, e.to_string(), None))??;
    let Value::Object(body) = read else {
        unreachable!("resources::read builds an object")
    };
    Ok(finish_result(body, meta.era, Some(ARTIFACT_CACHE)))
}

/// A tool as a plain method: the structured result itself, or a JSON-RPC error.
async fn plain_call(
    tool: &'static ToolDef,
    params: Params<'static>,
    state: Arc<ServerState>,
) -> Answer {
    let (mut p, meta) = read_request(&params)?;
    p.remove("_meta");
    let progress = cx::progress_for(&meta);
    tool.call(&state.engine, Value::Object(p), &progress)
        .await
        .map_err(|e| match e.kind() {
            ToolErrorKind::InvalidArguments { field } => error(
                protocol::INVALID_PARAMS,
                e.message(),
                field.as_ref().map(|f| json!({ "field": f })),
            ),
            ToolErrorKind::Failed => error(TOOL_FAILED, e.message(), None),
        })
}

/// Build the module every transport serves.
pub fn build(engine: Arc<Engine>) -> RpcModule<ServerState> {
    let mut module = RpcModule::new(ServerState { engine });
    let once = "MCP method names are registered once";
    let sync: [(&'static str, SyncHandler); 6] = [
        ("initialize", initialize),
        ("ping", ping),
        ("server/discover", discover),
        ("tools/list", tools_list),
        ("prompts/list", prompts_list),
        ("prompts/get", prompts_get),
    ];
    for (name, handler) in sync {
        module
            .register_method(name, move |p, _, _| handler(&p))
            .expect(once);
    }
    module
        .register_async_method("tools/call", |p, state, _| tools_call(p, state))
        .expect(once);
    module
        .register_async_method("resources/list", |p, state, _| resources_list(p, state))
        .expect(once);
    module
        .register_async_method("resources/read", |p, state, _| resources_read(p, state))
        .expect(once);
    for tool in tools::tools() {
        module
            .register_async_method(tool.name, move |p, state, _| plain_call(tool, p, state))
            .expect("tool names are unique and differ from MCP method names");
    }
    module
}
