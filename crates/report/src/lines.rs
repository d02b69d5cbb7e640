//! Lines as the user's file stands after revert. A run made while instrumentation was in a
//! file saw that file with our lines in it (the helper import at the top, decorators), so
//! every line it reports below one of them is off by as many. Every line we add ends in
//! `# [PROFILE] <change id>`, and the ledger keeps the file as each change left it
//! (`profile_output/.backup/<id>.after`): the lines of a run are mapped back through the
//! marked lines of the latest change active in that file when the run started.

use std::collections::BTreeMap;
use std::path::Path;
use system_profile_confine::Confined;
use system_profile_model::instrument::{Change, Ledger};
use system_profile_model::run::RunRecord;

/// The marker every added line ends with.
const MARK: &str = "# [PROFILE] c";

/// Seconds since the epoch of an RFC 3339 UTC stamp (`2026-12-03T10:30:00.123Z`), as the
/// ledger writes them; `None` for anything else.
pub fn unix_s(stamp: &str) -> Option<f64> {
    let num = |a: usize, b: usize| stamp.get(a..b)?.parse::<i64>().ok();
    let (y, m, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hh, mm, ss) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let frac = stamp
        .get(19..)
        .and_then(|r| r.strip_prefix('.'))
        .map(|r| r.trim_end_matches('Z'))
        .and_then(|r| format!("0.{r}").parse::<f64>().ok())
        .unwrap_or(0.0);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60 + ss) as f64 + frac)
}

/// The line a line of the instrumented file was in the original: minus the added lines above
/// it. An added line itself stays as it is (it is our code, and says so).
pub fn original_line(line: u32, added: &[u32]) -> u32 {
    if added.binary_search(&line).is_ok() {
        return line;
    }
    line - added.iter().take_while(|a| **a < line).count() as u32
}

/// The added lines of a file's instrumented text (1-based, ascending).
pub fn marked_lines(text: &str) -> Vec<u32> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(MARK))
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

/// Per absolute file path, the added lines in force when a run started at `at_unix_s`.
fn shifts_at(
    root: &Path,
    fs: &Confined,
    changes: &[Change],
    at_unix_s: f64,
) -> BTreeMap<String, Vec<u32>> {
    let mut latest: BTreeMap<&str, &Change> = BTreeMap::new();
    for c in changes {
        let made = unix_s(&c.created_at).unwrap_or(f64::MAX);
        let undone = c
            .reverted_at
            .as_deref()
            .and_then(unix_s)
            .unwrap_or(f64::MAX);
        if made <= at_unix_s && at_unix_s < undone && c.backup.is_some() {
            latest.insert(c.file.as_str(), c);
        }
    }
    latest
        .into_iter()
        .filter_map(|(file, c)| {
            let after = format!("{}/{}.after", system_profile_instrument::BACKUP_DIR, c.id);
            let (bytes, _) = fs.read_capped(Path::new(&after), 64 << 20).ok()?;
            let added = marked_lines(&String::from_utf8_lossy(&bytes));
            (!added.is_empty()).then(|| (root.join(file).to_string_lossy().into_owned(), added))
        })
        .collect()
}

/// Map every line the session's runs report back to the files as they stand after revert.
pub fn restore(root: &Path, runs: &mut [RunRecord]) {
    let Ok(fs) = Confined::open(root) else {
        return;
    };
    let Ok((bytes, _)) =
        fs.read_capped(Path::new(system_profile_instrument::LEDGER_FILE), 64 << 20)
    else {
        return;
    };
    let Ok(ledger) = serde_json::from_slice::<Ledger>(&bytes) else {
        return;
    };
    if ledger.changes.is_empty() {
        return;
    }
    for run in runs.iter_mut() {
        let shifts = shifts_at(root, &fs, &ledger.changes, run.started_at_unix_s);
        if shifts.is_empty() {
            continue;
        }
        let map = |file: &str, line: u32| -> u32 {
            shifts
                .iter()
                .find(|(f, _)| file == f.as_str() || f.ends_with(&format!("/{file}")))
                .map_or(line, |(_, added)| original_line(line, added))
        };
        let m = &mut run.metrics;
        if let Some(s) = m.stacks.as_mut() {
            for f in s.by_self.iter_mut().chain(s.by_total.iter_mut()) {
                if let (Some(file), Some(line)) = (f.file.as_deref(), f.line) {
                    f.line = Some(map(file, line));
                }
            }
            for l in &mut s.lines {
                l.line = map(&l.file, l.line);
            }
        }
        if let Some(c) = m.calls.as_mut() {
            for f in c.by_tottime.iter_mut().chain(c.by_cumtime.iter_mut()) {
                f.line = map(&f.file, f.line);
            }
        }
        if let Some(p) = m.python_memory.as_mut() {
            for s in p
                .peak_sites_by_size
                .iter_mut()
                .chain(p.exit_sites_by_size.iter_mut())
                .chain(p.exit_sites_by_count.iter_mut())
            {
                s.line = map(&s.file, s.line);
            }
        }
        if let Some(a) = m.allocations.as_mut() {
            for t in a.top_by_size.iter_mut().chain(a.top_by_count.iter_mut()) {
                if let Some(line) = t.line {
                    t.line = Some(map(&t.file, line));
                }
            }
            for t in &mut a.at_peak {
                if let Some(line) = t.line {
                    t.line = Some(map(&t.file, line));
                }
            }
        }
        if let Some(lp) = m.line_profile.as_mut() {
            let file = lp.file.clone();
            for l in &mut lp.lines {
                l.line = map(&file, l.line);
            }
        }
        if let Some(ml) = m.memory_lines.as_mut() {
            let file = ml.file.clone();
            for l in &mut ml.lines {
                l.line = map(&file, l.line);
            }
            ml.top_increment_line = ml.top_increment_line.map(|l| map(&file, l));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_and_shifts() {
        assert_eq!(unix_s("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(unix_s("2026-12-03T04:40:40Z"), Some(1_796_272_840.0));
        assert!((unix_s("2026-12-03T04:40:40.5Z").unwrap() - 1_796_272_840.5).abs() < 1e-6);
        assert_eq!(unix_s("yesterday"), None);
        // The helper import on line 1 and a decorator on line 10: line 18 of the instrumented
        // file was line 16.
        let text = "from x import _sp  # [PROFILE] c0001\nimport os\n\n\n\n\n\n\n\n@_sp.timed()  # [PROFILE] c0002\ndef f():\n";
        let added = marked_lines(text);
        assert_eq!(added, vec![1, 10]);
        assert_eq!(original_line(18, &added), 16);
        assert_eq!(original_line(5, &added), 4);
        assert_eq!(original_line(10, &added), 10);
        assert_eq!(original_line(1, &[]), 1);
    }
}
