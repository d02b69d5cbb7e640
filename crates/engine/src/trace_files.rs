//! `analyze_trace`'s work on files: one trace opened and handed to
//! `parse::kineto::analyze_compressed_or_not`; the balance of the ranks' times is
//! `parse::kineto::rank_balance`. Only the IO is here.

use crate::EngineError;
use system_profile_model::trace::TraceFile;

/// Analyse one trace file, compressed or not.
pub(crate) fn analyze_file(
    path: &std::path::Path,
    shown: String,
) -> Result<TraceFile, EngineError> {
    let failed = |e: std::io::Error| EngineError::Failed {
        message: format!("cannot read {}: {e}", path.display()),
    };
    let bytes = std::fs::metadata(path).map_err(failed)?.len();
    let file = std::fs::File::open(path).map_err(failed)?;
    let parsed =
        system_profile_parse::kineto::analyze_compressed_or_not(std::io::BufReader::new(file))
            .map_err(failed)?;
    Ok(TraceFile {
        path: shown,
        bytes,
        analysis: parsed.value,
        node_rank: None,
        diagnostics: parsed.diagnostics.into_iter().map(|d| d.message).collect(),
    })
}
