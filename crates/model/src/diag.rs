//! Diagnostics: what a parser or probe noticed but did not fail on.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One thing a parser skipped or doubted. Parsers never fail on messy input: they return the
/// value they could build and a list of these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Diag {
    /// 1-based line of the input the diagnostic is about, when it is about one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    pub message: String,
}

impl Diag {
    pub fn at(line: usize, message: impl Into<String>) -> Self {
        Diag {
            line: Some(line),
            message: message.into(),
        }
    }

    pub fn general(message: impl Into<String>) -> Self {
        Diag {
            line: None,
            message: message.into(),
        }
    }
}

/// A parser's answer: the value and what it noticed on the way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Parsed<T> {
    pub value: T,
    pub diagnostics: Vec<Diag>,
}
