//! Wire types of system-profile: the input and output of every tool, and the values parsers
//! hand back. serde and schemars derives live here and only here; this crate does no IO and
//! depends on nothing else in the workspace.

pub mod artifact;
pub mod catalog;
pub mod collectives;
pub mod detect;
pub mod diag;
pub mod instrument;
pub mod metrics;
pub mod options;
pub mod peaks;
pub mod plan;
pub mod recipe;
pub mod report;
pub mod run;
pub mod secrets;
pub mod target;
pub mod topology;
pub mod trace;
pub mod validate;

pub use diag::{Diag, Parsed};

/// The name a unit enum variant has on the wire (`py_spy_record`, `timed_out`), for messages
/// and tables that must say what the JSON says.
pub fn wire_name<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
