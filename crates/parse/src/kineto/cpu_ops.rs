//! torch's operators on the CPU (`cpu_op` events, and `record_function` labels), timed as
//! torch.profiler's own table (`key_averages`) times them: total time per name, and self time,
//! each event's time less its direct children's on the same thread; with the input shapes that
//! took the most self time, when the trace was recorded with `record_shapes`.

use std::collections::HashMap;
use system_profile_model::metrics::CpuOp;

/// Operators listed, by self time.
const TOP_OPS: usize = 30;
/// Input shapes listed per operator.
const TOP_SHAPES: usize = 2;

struct OpEvent {
    tid: u64,
    ts: f64,
    dur: f64,
    /// Index into `names`.
    name: u32,
    /// Index into `names`: its input dims, compacted.
    dims: Option<u32>,
}

#[derive(Default)]
pub(super) struct CpuOpAcc {
    events: Vec<OpEvent>,
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

/// `[[128, 64], [], [64]]` as `[128,64], [64]`: the tensors' shapes, scalars left out.
fn compact_dims(raw: &str) -> Option<String> {
    let dims: Vec<Vec<u64>> = serde_json::from_str(raw).ok()?;
    let shapes: Vec<String> = dims
        .iter()
        .filter(|d| !d.is_empty())
        .map(|d| {
            let inner: Vec<String> = d.iter().map(u64::to_string).collect();
            format!("[{}]", inner.join(","))
        })
        .collect();
    (!shapes.is_empty()).then(|| shapes.join(", "))
}

impl CpuOpAcc {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(id) = self.ids.get(s) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }

    /// An `X` event; kept when it is an operator or a label on a known thread.
    pub(super) fn add(
        &mut self,
        cat: &str,
        name: &str,
        ts: f64,
        dur: f64,
        tid: Option<u64>,
        input_dims: Option<&str>,
    ) {
        let (true, Some(tid)) = (matches!(cat, "cpu_op" | "user_annotation"), tid) else {
            return;
        };
        let name = self.intern(name);
        let dims = input_dims.and_then(compact_dims).map(|d| self.intern(&d));
        self.events.push(OpEvent {
            tid,
            ts,
            dur,
            name,
            dims,
        });
    }

    pub(super) fn finish(mut self) -> Vec<CpuOp> {
        // Per thread in start order (the longer first when two start together): each event's
        // parent is the innermost open one that it starts inside.
        self.events.sort_by(|a, b| {
            a.tid
                .cmp(&b.tid)
                .then(a.ts.total_cmp(&b.ts))
                .then(b.dur.total_cmp(&a.dur))
        });
        let mut own: Vec<f64> = self.events.iter().map(|e| e.dur).collect();
        let mut parent: Vec<Option<usize>> = vec![None; self.events.len()];
        let mut children = vec![0u32; self.events.len()];
        let mut open: Vec<usize> = Vec::new();
        for (i, e) in self.events.iter().enumerate() {
            while let Some(&top) = open.last() {
                let t = &self.events[top];
                if t.tid != e.tid || t.ts + t.dur <= e.ts {
                    open.pop();
                } else {
                    break;
                }
            }
            if let Some(&p) = open.last() {
                own[p] -= e.dur;
                parent[i] = Some(p);
                children[p] += 1;
            }
            open.push(i);
        }
        // As torch's table does (`_remove_dup_nodes`): an operator whose one child is the
        // same operator (a scalar overload calling the tensor one) counts once, the child's
        // own time its own. Deepest first, so a chain folds into its top.
        let mut kept = vec![true; self.events.len()];
        for i in (0..self.events.len()).rev() {
            if let Some(p) = parent[i] {
                if children[p] == 1 && self.events[p].name == self.events[i].name {
                    own[p] += own[i];
                    kept[i] = false;
                }
            }
        }
        struct Row {
            calls: u64,
            self_us: f64,
            total_us: f64,
            shapes: HashMap<u32, f64>,
        }
        // Ordered, so the shares sum in the same order every read.
        let mut rows: std::collections::BTreeMap<u32, Row> = Default::default();
        for ((e, self_us), _) in self
            .events
            .iter()
            .zip(own)
            .zip(&kept)
            .filter(|(_, kept)| **kept)
        {
            let r = rows.entry(e.name).or_insert(Row {
                calls: 0,
                self_us: 0.0,
                total_us: 0.0,
                shapes: HashMap::new(),
            });
            r.calls += 1;
            r.self_us += self_us;
            r.total_us += e.dur;
            if let Some(d) = e.dims {
                *r.shapes.entry(d).or_default() += self_us;
            }
        }
        // The profiler's step markers are the loop itself, not an operator.
        rows.retain(|name, _| !self.names[*name as usize].starts_with("ProfilerStep#"));
        let all_self: f64 = rows.values().map(|r| r.self_us).sum();
        let mut ops: Vec<CpuOp> = rows
            .into_iter()
            .map(|(name, r)| {
                let mut shapes: Vec<(u32, f64)> = r.shapes.into_iter().collect();
                shapes.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                CpuOp {
                    name: self.names[name as usize].clone(),
                    calls: r.calls,
                    self_us: r.self_us,
                    total_us: r.total_us,
                    self_percent: if all_self > 0.0 {
                        r.self_us / all_self * 100.0
                    } else {
                        0.0
                    },
                    shape_self_percent: shapes
                        .iter()
                        .take(TOP_SHAPES)
                        .map(|(_, us)| {
                            if all_self > 0.0 {
                                us / all_self * 100.0
                            } else {
                                0.0
                            }
                        })
                        .collect(),
                    shapes: shapes
                        .into_iter()
                        .take(TOP_SHAPES)
                        .map(|(d, _)| self.names[d as usize].clone())
                        .collect(),
                }
            })
            .collect();
        ops.sort_by(|a, b| b.self_us.total_cmp(&a.self_us).then(a.name.cmp(&b.name)));
        ops.truncate(TOP_OPS);
        ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_time_is_less_the_direct_children_on_the_same_thread() {
        let mut acc = CpuOpAcc::default();
        acc.add("cpu_op", "aten::linear", 0.0, 100.0, Some(1), None);
        acc.add(
            "cpu_op",
            "aten::addmm",
            10.0,
            60.0,
            Some(1),
            Some("[[8], [4, 2], []]"),
        );
        acc.add("cpu_op", "aten::copy_", 20.0, 30.0, Some(1), None);
        // Another thread at the same time is no child.
        acc.add("cpu_op", "aten::mm", 5.0, 50.0, Some(2), None);
        acc.add(
            "user_annotation",
            "ProfilerStep#3",
            0.0,
            200.0,
            Some(1),
            None,
        );
        acc.add("kernel", "sgemm", 0.0, 5.0, Some(1), None);
        let ops = acc.finish();
        let get = |n: &str| ops.iter().find(|o| o.name == n).unwrap();
        assert_eq!(
            (get("aten::linear").self_us, get("aten::linear").total_us),
            (40.0, 100.0)
        );
        assert_eq!(get("aten::addmm").self_us, 30.0);
        assert_eq!(get("aten::copy_").self_us, 30.0);
        assert_eq!(get("aten::mm").self_us, 50.0);
        assert_eq!(get("aten::addmm").shapes, vec!["[8], [4,2]".to_string()]);
        assert!(ops.iter().all(|o| !o.name.starts_with("ProfilerStep")));
        assert_eq!(ops[0].name, "aten::mm");
    }

    #[test]
    fn an_operator_whose_one_child_is_itself_counts_once() {
        let mut acc = CpuOpAcc::default();
        acc.add("cpu_op", "aten::mul", 0.0, 10.0, Some(1), None);
        acc.add("cpu_op", "aten::mul", 1.0, 8.0, Some(1), None);
        acc.add("cpu_op", "aten::empty", 2.0, 1.0, Some(1), None);
        let ops = acc.finish();
        let mul = ops.iter().find(|o| o.name == "aten::mul").unwrap();
        assert_eq!((mul.calls, mul.self_us, mul.total_us), (1, 9.0, 10.0));
    }
}
