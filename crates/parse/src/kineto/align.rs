//! The ranks' clocks lined up on the collectives they share. Each node stamps its trace with
//! its own clock, so traces from different nodes cannot be laid side by side as they are
//! (vLLM's and Holistic Trace Analysis's limit). A collective cannot end on one rank before it
//! has started on every rank: each matched pair of spans bounds the offset between two clocks
//! from both sides, and all the pairs together bound it to an interval, whose middle is the
//! offset and whose half width is its uncertainty.

use super::ranks::rank_numbers;
use system_profile_model::trace::{ClockAlignment, RankClock, SyncBasis, SyncPoint, TraceFile};

/// Fewest matched collectives an offset is given from.
const MIN_MATCHED: usize = 3;
/// Share of matched pairs whose payloads may differ before the matching is doubted.
const MISMATCH_SHARE: f64 = 0.1;

/// Every trace's clock against the lowest rank's (two traces or more), in the traces' order.
pub fn align_clocks(traces: &[TraceFile]) -> Option<ClockAlignment> {
    if traces.len() < 2 {
        return None;
    }
    let ranks = rank_numbers(traces);
    let reference = (0..traces.len()).min_by_key(|&i| ranks[i])?;
    let of_ref = &traces[reference].analysis.sync_points;
    let clocks = traces
        .iter()
        .zip(&ranks)
        .enumerate()
        .map(|(i, (t, &rank))| {
            if i == reference {
                let basis = main_basis(of_ref);
                return RankClock {
                    rank,
                    path: t.path.clone(),
                    offset_us: Some(0.0),
                    uncertainty_us: Some(0.0),
                    collectives: basis.map_or(0, |b| of_basis(of_ref, b).len() as u32),
                    basis,
                    bounded: true,
                    note: Some("the reference: the others are put on its clock".into()),
                };
            }
            against(
                rank,
                &t.path,
                &t.analysis.sync_points,
                of_ref,
                ranks[reference],
            )
        })
        .collect();
    Some(ClockAlignment {
        reference_rank: ranks[reference],
        ranks: clocks,
        merged_trace: None,
    })
}

/// NCCL kernels where the trace has them (the transfers themselves), else gloo's spans.
fn main_basis(points: &[SyncPoint]) -> Option<SyncBasis> {
    [SyncBasis::NcclKernels, SyncBasis::GlooCollectives]
        .into_iter()
        .find(|b| points.iter().any(|p| p.basis == *b))
}

fn of_basis(points: &[SyncPoint], basis: SyncBasis) -> Vec<&SyncPoint> {
    points.iter().filter(|p| p.basis == basis).collect()
}

/// Pairs the same collective on two ranks: within each profiler step by their order there
/// when both traces have steps (the traces may cover different steps), else by their order
/// in the whole trace (the traces must start at the same collective).
fn matched<'a>(
    mine: &[&'a SyncPoint],
    theirs: &[&'a SyncPoint],
) -> (Vec<(&'a SyncPoint, &'a SyncPoint)>, bool) {
    let stepped = |v: &[&SyncPoint]| !v.is_empty() && v.iter().all(|p| p.step.is_some());
    if !(stepped(mine) && stepped(theirs)) {
        let pairs = mine.iter().copied().zip(theirs.iter().copied()).collect();
        return (pairs, false);
    }
    let by_step = |v: &[&'a SyncPoint]| {
        let mut m: std::collections::BTreeMap<u64, Vec<&'a SyncPoint>> = Default::default();
        for p in v {
            m.entry(p.step.unwrap_or_default()).or_default().push(p);
        }
        m
    };
    let (a, b) = (by_step(mine), by_step(theirs));
    let pairs = a
        .iter()
        .filter_map(|(step, pa)| Some(pa.iter().copied().zip(b.get(step)?.iter().copied())))
        .flatten()
        .collect();
    (pairs, true)
}

fn against(
    rank: u32,
    path: &str,
    mine: &[SyncPoint],
    of_ref: &[SyncPoint],
    reference: u32,
) -> RankClock {
    let mut clock = RankClock {
        rank,
        path: path.to_string(),
        offset_us: None,
        uncertainty_us: None,
        collectives: 0,
        basis: None,
        bounded: false,
        note: None,
    };
    let common = [SyncBasis::NcclKernels, SyncBasis::GlooCollectives]
        .into_iter()
        .find(|b| mine.iter().any(|p| p.basis == *b) && of_ref.iter().any(|p| p.basis == *b));
    let Some(basis) = common else {
        clock.note = Some(format!(
            "no collective in common with rank {reference}'s trace (NCCL kernels or gloo's collectives): recorded without them, or a different job's"
        ));
        return clock;
    };
    clock.basis = Some(basis);
    let (pairs, by_step) = matched(&of_basis(mine, basis), &of_basis(of_ref, basis));
    let differ = |(m, r): &(&SyncPoint, &SyncPoint)| matches!((m.bytes, r.bytes), (Some(a), Some(b)) if a != b);
    let mismatched = pairs.iter().filter(|p| differ(p)).count();
    let pairs: Vec<_> = pairs.into_iter().filter(|p| !differ(p)).collect();
    clock.collectives = pairs.len() as u32;
    let matching = if by_step {
        "matched within each profiler step"
    } else {
        "matched by order (no profiler steps): the traces must start at the same collective"
    };
    if mismatched as f64 > MISMATCH_SHARE * (pairs.len() + mismatched) as f64 {
        clock.note = Some(format!(
            "{mismatched} of {} collectives {matching} differ in size from rank {reference}'s: the traces cover different steps or different jobs",
            pairs.len() + mismatched
        ));
        return clock;
    }
    if pairs.len() < MIN_MATCHED {
        clock.note = Some(format!(
            "{} collectives in common with rank {reference}'s trace ({matching}); {MIN_MATCHED} are needed",
            pairs.len()
        ));
        return clock;
    }
    // Its clock minus the reference's lies between these: its collective ended after the
    // reference's began, and the reference's ended after its own began.
    let lo = pairs
        .iter()
        .map(|(m, r)| m.start_us - r.end_us)
        .fold(f64::NEG_INFINITY, f64::max);
    let hi = pairs
        .iter()
        .map(|(m, r)| m.end_us - r.start_us)
        .fold(f64::INFINITY, f64::min);
    if lo <= hi {
        clock.offset_us = Some((lo + hi) / 2.0);
        clock.uncertainty_us = Some((hi - lo) / 2.0);
        clock.bounded = true;
        clock.note = (!by_step).then(|| matching.to_string());
    } else {
        // Spans that are not the transfer on every rank (an asynchronous collective timed at
        // its call) bound nothing: the ends' differences, their median and its spread.
        let mut ends: Vec<f64> = pairs.iter().map(|(m, r)| m.end_us - r.end_us).collect();
        let median = median(&mut ends);
        let mut spread: Vec<f64> = ends.iter().map(|d| (d - median).abs()).collect();
        clock.offset_us = Some(median);
        clock.uncertainty_us = Some(self::median(&mut spread));
        clock.note = Some(format!(
            "the collectives' spans do not bound one offset (some are not the transfer itself): the median of their ends' differences, {matching}"
        ));
    }
    clock
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use system_profile_model::metrics::TraceAnalysis;

    fn point(step: Option<u64>, start_us: f64, end_us: f64) -> SyncPoint {
        SyncPoint {
            basis: SyncBasis::NcclKernels,
            step,
            start_us,
            end_us,
            bytes: Some(4096),
        }
    }

    fn trace(rank: u32, points: Vec<SyncPoint>) -> TraceFile {
        TraceFile {
            path: format!("rank{rank}.json"),
            bytes: 0,
            analysis: TraceAnalysis {
                rank: Some(rank),
                sync_points: points,
                ..Default::default()
            },
            node_rank: None,
            diagnostics: Vec::new(),
        }
    }

    /// Rank 1's clock runs 5 s ahead; it arrives late at the second collective (the
    /// reference waits), early at the third: the interval closes on the true offset.
    #[test]
    fn the_offset_is_bounded_from_both_sides() {
        let skew = 5e6;
        let r0 = vec![
            point(Some(1), 100.0, 150.0),
            point(Some(2), 300.0, 420.0),
            point(Some(3), 600.0, 650.0),
        ];
        let r1 = vec![
            point(Some(1), 110.0 + skew, 152.0 + skew),
            point(Some(2), 400.0 + skew, 421.0 + skew),
            point(Some(3), 560.0 + skew, 649.0 + skew),
        ];
        let a = align_clocks(&[trace(1, r1), trace(0, r0)]).unwrap();
        assert_eq!(a.reference_rank, 0);
        let c = &a.ranks[0];
        assert!(c.bounded, "{c:?}");
        let (offset, unc) = (c.offset_us.unwrap(), c.uncertainty_us.unwrap());
        assert!((offset - skew).abs() <= unc, "{offset} ± {unc}");
        assert!(unc < 40.0, "{unc}");
        assert_eq!(c.collectives, 3);
    }

    /// The traces cover different steps: only steps both have are matched.
    #[test]
    fn steps_match_collectives_across_different_windows() {
        let r0 = (1..=5)
            .map(|s| point(Some(s), s as f64 * 1000.0, s as f64 * 1000.0 + 50.0))
            .collect();
        let r1 = (3..=8)
            .map(|s| point(Some(s), s as f64 * 1000.0 + 7.0, s as f64 * 1000.0 + 51.0))
            .collect();
        let a = align_clocks(&[trace(0, r0), trace(1, r1)]).unwrap();
        let c = &a.ranks[1];
        assert_eq!(c.collectives, 3, "{c:?}");
        assert!(c.offset_us.unwrap().abs() <= c.uncertainty_us.unwrap());
    }

    #[test]
    fn collectives_of_other_sizes_are_not_lined_up() {
        let r0: Vec<_> = (0..4)
            .map(|i| point(None, i as f64 * 10.0, i as f64 * 10.0 + 5.0))
            .collect();
        let r1 = r0
            .iter()
            .map(|p| SyncPoint {
                bytes: Some(8),
                ..p.clone()
            })
            .collect();
        let a = align_clocks(&[trace(0, r0), trace(1, r1)]).unwrap();
        assert_eq!(a.ranks[1].offset_us, None);
        assert!(a.ranks[1]
            .note
            .as_deref()
            .unwrap()
            .contains("differ in size"));
        let none = align_clocks(&[trace(0, Vec::new()), trace(1, Vec::new())]).unwrap();
        assert!(none.ranks[1]
            .note
            .as_deref()
            .unwrap()
            .contains("no collective in common"));
    }
}
