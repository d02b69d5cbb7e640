//! `analyze_trace`'s work on files: one trace read and analysed (gzip told by its magic
//! bytes); the balance of the ranks' times is `parse::kineto::rank_balance`.

use crate::EngineError;
use system_profile_model::trace::TraceFile;

/// Analyse one trace file, reading it as gzip when it starts with gzip's magic bytes.
pub(crate) fn analyze_file(
    path: &std::path::Path,
    shown: String,
) -> Result<TraceFile, EngineError> {
    use std::io::Read;
    let failed = |e: std::io::Error| EngineError::Failed {
        message: format!("cannot read {}: {e}", path.display()),
    };
    let bytes = std::fs::metadata(path).map_err(failed)?.len();
    let mut file = std::fs::File::open(path).map_err(failed)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(failed)?;
    let head = std::io::Cursor::new(magic[..n].to_vec());
    let reader = head.chain(file);
    let parsed = if magic[..n] == [0x1f, 0x8b] {
        system_profile_parse::kineto::analyze_reader(flate2::read::GzDecoder::new(reader))
    } else {
        system_profile_parse::kineto::analyze_reader(reader)
    };
    Ok(TraceFile {
        path: shown,
        bytes,
        analysis: parsed.value,
        node_rank: None,
        diagnostics: parsed.diagnostics.into_iter().map(|d| d.message).collect(),
    })
}
