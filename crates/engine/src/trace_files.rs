//! `analyze_trace`'s work on files: one trace opened and handed to
//! `parse::kineto::analyze_compressed_or_not`; the balance of the ranks' times is
//! `parse::kineto::rank_balance`. Only the IO is here.

use crate::EngineError;
use system_profile_confine::Confined;
use system_profile_model::trace::{ClockAlignment, TraceFile};

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

/// The ranks' traces (`files`, in `traces`' order) on the reference rank's clock, gzipped, in a
/// new file `target` under `fs`'s root. A rank without an offset is left out (its clock's
/// note says why).
pub(crate) fn merge(
    fs: &Confined,
    target: &std::path::Path,
    files: &[std::path::PathBuf],
    traces: &[TraceFile],
    alignment: &ClockAlignment,
) -> std::io::Result<()> {
    let readers = files
        .iter()
        .map(|p| std::fs::File::open(p).map(std::io::BufReader::new))
        .collect::<std::io::Result<Vec<_>>>()?;
    let out = fs.create_new(target, 0o644).map_err(|e| e.into_io())?;
    let notes = system_profile_parse::kineto::write_merged_gzip(
        readers,
        traces,
        alignment,
        std::io::BufWriter::new(out),
    )?;
    for note in notes {
        tracing::info!("merged trace: {note}");
    }
    Ok(())
}
