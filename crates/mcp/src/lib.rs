//! The MCP/JSON-RPC face of system-profile, and the only crate that writes protocol messages:
//! the tool registry and its JSON Schemas (`tools`; `lean` sizes them for a model's context, `brief`
//! the text of its results), the MCP protocol rules of both eras
//! (`protocol`), one jsonrpsee `RpcModule` routing every method (`router`), our stdio
//! transport (`stdio`), the WebSocket/HTTP listener (`listen`) and who may use it (`guard`), and the `system-profile` binary
//! (`main.rs`: serve, call, schemas).

pub mod brief;
pub mod cx;
pub mod guard;
pub mod lean;
pub mod listen;
pub mod prompts;
pub mod protocol;
pub mod resources;
pub mod router;
pub mod stdio;
pub mod tools;
