//! `analyze_trace`'s work on files: one trace read and analysed (gzip told by its magic
//! bytes), and the balance of the ranks' times.

use crate::EngineError;
use system_profile_model::trace::{RankBalance, RankTime, TraceFile};

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
        diagnostics: parsed.diagnostics.into_iter().map(|d| d.message).collect(),
    })
}

/// Compute and communication time per rank, and who the others wait for.
pub(crate) fn rank_balance(traces: &[TraceFile]) -> Option<RankBalance> {
    if traces.len() < 2 {
        return None;
    }
    // Ranks from the traces' distributedInfo, unless two say the same (copies, or traces of
    // different jobs): then their order in `paths`.
    let mut said: Vec<Option<u32>> = traces.iter().map(|t| t.analysis.rank).collect();
    let mut seen = std::collections::HashSet::new();
    if said.iter().any(|r| r.is_none() || !seen.insert(*r)) {
        said = (0..traces.len() as u32).map(Some).collect();
    }
    let ranks: Vec<RankTime> = traces
        .iter()
        .zip(said)
        .map(|(t, rank)| RankTime {
            rank: rank.unwrap_or(0),
            path: t.path.clone(),
            compute_us: t.analysis.devices.iter().fold(0.0, |a, d| a + d.compute_us),
            comm_us: t.analysis.devices.iter().fold(0.0, |a, d| a + d.comm_us),
            idle_us: t.analysis.devices.iter().fold(0.0, |a, d| a + d.idle_us),
        })
        .collect();
    let mut compute: Vec<f64> = ranks.iter().map(|r| r.compute_us).collect();
    compute.sort_by(f64::total_cmp);
    // The lower median: with two ranks, the faster one is the reference.
    let median = compute[(compute.len() - 1) / 2];
    let (lo, hi) = (compute[0], compute[compute.len() - 1]);
    Some(RankBalance {
        compute_imbalance: if lo > 0.0 { hi / lo } else { 0.0 },
        stragglers: ranks
            .iter()
            .filter(|r| median > 0.0 && r.compute_us > median * 1.1)
            .map(|r| r.rank)
            .collect(),
        ranks,
    })
}
