//! MCP protocol facts shared by both transports: the versions we speak, the error codes, what a
//! request's `_meta` says, and how a result is dressed for the era of the request.
//!
//! Both eras are decided per request, not per connection state: a request whose `_meta`
//! carries `io.modelcontextprotocol/protocolVersion` is served under 2026-07-28 rules (and
//! refused with -32022 when it names a version we do not speak); any other request is served
//! as the handshake era always was. So a server needs no session state to answer either.

use jsonrpsee::types::ErrorObjectOwned;
use serde_json::{json, Map, Value};

/// Handshake-era versions `initialize` can agree on, newest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Per-request-envelope versions, newest first.
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

pub const PROTOCOL_VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;
/// 2026-07-28: the request's declared protocol version is not one we implement.
pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;

pub const SERVER_NAME: &str = "system-profile";
pub const SERVER_TITLE: &str = "system-profile: profiling tools for agents";
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the server tells a client about itself, in `initialize` and `server/discover`.
pub const INSTRUCTIONS: &str = "Profiling tools for Python services, PyTorch training and LLM \
serving on Linux with NVIDIA GPUs. Call detect_tools first: it says which profilers are usable \
here (and why not), the CPU, memory, GPUs and their NVLink/PCIe topology, and the target's \
Python environment.";

/// Every version we answer, newest first (the `supported` list of -32022 and discover).
pub fn supported_versions() -> Vec<&'static str> {
    MODERN_VERSIONS
        .iter()
        .chain(HANDSHAKE_VERSIONS.iter())
        .copied()
        .collect()
}

/// The version `initialize` answers for the one the client asked for: the same when we speak
/// it, else our newest handshake version (the client then decides whether to go on).
pub fn negotiate_handshake(requested: &str) -> &'static str {
    HANDSHAKE_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(HANDSHAKE_VERSIONS[0])
}

pub fn server_info() -> Value {
    json!({ "name": SERVER_NAME, "title": SERVER_TITLE, "version": SERVER_VERSION })
}

/// What we serve: the tools, the `system-profile` prompt (the slash command) and the
/// artifacts under `profile_output/` as resources.
pub fn capabilities() -> Value {
    json!({
        "tools": { "listChanged": false },
        "prompts": { "listChanged": false },
        "resources": { "listChanged": false, "subscribe": false },
    })
}

/// A JSON-RPC error object.
pub fn error(code: i32, message: impl Into<String>, data: Option<Value>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(code, message.into(), data)
}

pub fn invalid_params(message: impl Into<String>) -> ErrorObjectOwned {
    error(INVALID_PARAMS, message, None)
}

/// The era a request was made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// No per-request version: the `initialize` handshake era.
    Handshake,
    /// 2026-07-28: results carry `resultType`, cache hints and server info.
    Modern,
}

/// What a request's `params._meta` says that the server acts on.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestMeta {
    pub era: Era,
    /// `_meta.progressToken` (a string or a number), echoed in `notifications/progress`.
    pub progress_token: Option<Value>,
}

impl RequestMeta {
    /// Read a request's `params._meta`; -32022 when it names a protocol version we do not
    /// speak, -32602 when `_meta` or its version is not of the right type.
    pub fn read(meta: Option<&Value>) -> Result<RequestMeta, ErrorObjectOwned> {
        let meta = match meta {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err(invalid_params("`_meta` must be an object")),
        };
        let era = match meta.and_then(|m| m.get(PROTOCOL_VERSION_META_KEY)) {
            None => Era::Handshake,
            Some(Value::String(v)) if MODERN_VERSIONS.contains(&v.as_str()) => Era::Modern,
            Some(Value::String(v)) => {
                return Err(error(
                    UNSUPPORTED_PROTOCOL_VERSION,
                    format!(
                    "unsupported protocol version {v:?} in `_meta.{PROTOCOL_VERSION_META_KEY}`; \
                         this server speaks {} per request, and {} through initialize",
                    MODERN_VERSIONS.join(", "),
                    HANDSHAKE_VERSIONS.join(", ")
                ),
                    Some(json!({ "supported": supported_versions(), "requested": v })),
                ))
            }
            Some(_) => {
                return Err(invalid_params(format!(
                    "`_meta.{PROTOCOL_VERSION_META_KEY}` must be a string"
                )))
            }
        };
        let progress_token = match meta.and_then(|m| m.get("progressToken")) {
            None | Some(Value::Null) => None,
            Some(t @ (Value::String(_) | Value::Number(_))) => Some(t.clone()),
            Some(_) => {
                return Err(invalid_params(
                    "`_meta.progressToken` must be a string or a number",
                ))
            }
        };
        Ok(RequestMeta {
            era,
            progress_token,
        })
    }
}

/// How a result may be cached by a 2026-07-28 client.
#[derive(Debug, Clone, Copy)]
pub struct CacheHint {
    pub ttl_ms: u64,
    pub public: bool,
}

/// Dress a result for its era: 2026-07-28 results carry `resultType`, server info in `_meta`,
/// and (for cacheable methods) `ttlMs` and `cacheScope`; handshake-era results stay as they
/// were, so strict older clients see nothing new.
pub fn finish_result(mut result: Map<String, Value>, era: Era, cache: Option<CacheHint>) -> Value {
    if era == Era::Modern {
        result.insert("resultType".into(), json!("complete"));
        if let Some(hint) = cache {
            result.insert("ttlMs".into(), json!(hint.ttl_ms));
            let scope = if hint.public { "public" } else { "private" };
            result.insert("cacheScope".into(), json!(scope));
        }
        let meta = result
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(SERVER_INFO_META_KEY.into(), server_info());
        }
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_negotiation_keeps_known_versions_and_offers_the_newest_otherwise() {
        assert_eq!(negotiate_handshake("2024-11-05"), "2024-11-05");
        assert_eq!(negotiate_handshake("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate_handshake("2025-11-25"), "2025-11-25");
        assert_eq!(negotiate_handshake("1999-01-01"), "2025-11-25");
        assert_eq!(negotiate_handshake("2026-07-28"), "2025-11-25");
    }

    #[test]
    fn meta_decides_the_era_and_refuses_unknown_versions_with_the_supported_list() {
        let none = RequestMeta::read(None).unwrap();
        assert_eq!(none.era, Era::Handshake);
        let modern = RequestMeta::read(Some(&json!({
            PROTOCOL_VERSION_META_KEY: "2026-07-28", "progressToken": 7})))
        .unwrap();
        assert_eq!(modern.era, Era::Modern);
        assert_eq!(modern.progress_token, Some(json!(7)));
        let err = RequestMeta::read(Some(&json!({
            PROTOCOL_VERSION_META_KEY: "2099-01-01"})))
        .unwrap_err();
        assert_eq!(err.code(), UNSUPPORTED_PROTOCOL_VERSION);
        let data: Value = serde_json::from_str(err.data().unwrap().get()).unwrap();
        assert_eq!(data["requested"], "2099-01-01");
        assert_eq!(data["supported"][0], "2026-07-28");
        let err = RequestMeta::read(Some(&json!({"progressToken": [1]}))).unwrap_err();
        assert_eq!(err.code(), INVALID_PARAMS);
        assert!(err.message().contains("progressToken"));
        let err = RequestMeta::read(Some(&json!("2026-07-28"))).unwrap_err();
        assert_eq!(err.code(), INVALID_PARAMS);
    }

    #[test]
    fn modern_results_carry_result_type_cache_hints_and_server_info_handshake_ones_do_not() {
        let mut body = Map::new();
        body.insert("tools".into(), json!([]));
        let hint = Some(CacheHint {
            ttl_ms: 60_000,
            public: false,
        });
        let modern = finish_result(body.clone(), Era::Modern, hint);
        assert_eq!(modern["resultType"], "complete");
        assert_eq!(modern["ttlMs"], 60_000);
        assert_eq!(modern["cacheScope"], "private");
        assert_eq!(modern["_meta"][SERVER_INFO_META_KEY]["name"], SERVER_NAME);
        let legacy = finish_result(body, Era::Handshake, hint);
        assert_eq!(legacy, json!({"tools": []}));
    }
}
