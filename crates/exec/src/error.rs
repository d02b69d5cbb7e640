use std::fmt;

/// Why a child could not be run. The kind is private to keep room to grow; ask with the
/// accessors.
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct ExecError {
    kind: ExecErrorKind,
}

#[derive(Debug)]
#[non_exhaustive]
pub enum ExecErrorKind {
    /// The program is not on PATH or the path does not exist.
    NotFound { program: String },
    /// The program exists but may not be executed.
    PermissionDenied { program: String },
    /// The argv was empty.
    EmptyArgv,
    /// Any other failure to start or to read the child.
    Io {
        program: String,
        source: std::io::Error,
    },
}

impl fmt::Display for ExecErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecErrorKind::NotFound { program } => {
                write!(f, "'{program}' was not found: install it or put it on PATH")
            }
            ExecErrorKind::PermissionDenied { program } => {
                write!(f, "'{program}' may not be executed: check its permissions")
            }
            ExecErrorKind::EmptyArgv => write!(f, "the command is empty: give at least a program"),
            ExecErrorKind::Io { program, source } => write!(f, "running '{program}': {source}"),
        }
    }
}

impl ExecError {
    pub(crate) fn new(kind: ExecErrorKind) -> Self {
        ExecError { kind }
    }

    pub fn kind(&self) -> &ExecErrorKind {
        &self.kind
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self.kind, ExecErrorKind::NotFound { .. })
    }
}
