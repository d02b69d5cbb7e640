//! The method router: one jsonrpsee `RpcModule` holding the MCP methods (`initialize`, `ping`,
//! `server/discover`, `tools/list`, `tools/call`) and every tool as a plain JSON-RPC method of
//! its own name. Both transports (our stdio loop and jsonrpsee's WebSocket/HTTP server) serve
//! this same module.

use crate::cx;
use crate::protocol::{
    self, capabilities, error, finish_result, invalid_params, negotiate_handshake, server_info,
    supported_versions, CacheHint, Era, RequestMeta, INSTRUCTIONS,
};
use crate::tools::{self, json_type_name, ToolDef, ToolErrorKind};
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
    let arguments = p.remove("arguments").unwrap_or(Value::Null);
    let progress = cx::progress_for(&meta);
    let mut body = Map::new();
    match tool.call(&state.engine, arguments, &progress).await {
        Ok(value) => {
            body.insert(
                "content".into(),
                json!([{ "type": "text", "text": tool.text(&value) }]),
            );
            body.insert("structuredContent".into(), value);
            body.insert("isError".into(), json!(false));
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
    let sync: [(&'static str, SyncHandler); 4] = [
        ("initialize", initialize),
        ("ping", ping),
        ("server/discover", discover),
        ("tools/list", tools_list),
    ];
    for (name, handler) in sync {
        module
            .register_method(name, move |p, _, _| handler(&p))
            .expect(once);
    }
    module
        .register_async_method("tools/call", |p, state, _| tools_call(p, state))
        .expect(once);
    for tool in tools::tools() {
        module
            .register_async_method(tool.name, move |p, state, _| plain_call(tool, p, state))
            .expect("tool names are unique and differ from MCP method names");
    }
    module
}
