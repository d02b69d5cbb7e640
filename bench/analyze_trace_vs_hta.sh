#!/usr/bin/env bash
# analyze_trace against Holistic Trace Analysis on the same traces: N ranks, each a copy of the
# real 2-rank NCCL trace (crates/parse/tests/data/kineto) with its rank renumbered and its
# events repeated R times (shifted in time), so the sizes grow while the content stays real.
# Prints wall time and peak RSS of both, and both tools' idle / compute / non-compute times per
# rank (HTA with HTA_DISABLE_NS_ROUNDING=1, so it keeps the trace's sub-µs times as we do).
#
#   bash bench/analyze_trace_vs_hta.sh [RANKS] [REPEAT]      (default 4 ranks, 10 repeats)
#
# Needs: a release build (cargo build --release -p system-profile-mcp) and HTA in a venv:
#   python3 -m venv /tmp/htavenv && /tmp/htavenv/bin/pip install HolisticTraceAnalysis
set -euo pipefail
RANKS=${1:-4}
REPEAT=${2:-10}
HERE=$(cd "$(dirname "$0")/.." && pwd)
HTA_PY=${HTA_PY:-/tmp/htavenv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/traces"
for rank in $(seq 0 $((RANKS - 1))); do
    python3 "$HERE/bench/grow_trace.py" "$HERE/crates/parse/tests/data/kineto/hta-a100-2rank-nccl-allreduce.json.gz" \
        "$WORK/traces/rank$rank.json.gz" --repeat "$REPEAT" --rank "$rank"
done
du -sh "$WORK/traces"
paths=$(python3 -c "import json,sys; print(json.dumps({'paths': ['traces/rank%d.json.gz' % r for r in range(int(sys.argv[1]))]}))" "$RANKS")
echo "== system-profile analyze_trace"
/usr/bin/time -f "wall %e s, peak RSS %M KB" "$HERE/target/release/system-profile" call analyze_trace "$paths" --root "$WORK" > "$WORK/ours.json"
python3 - "$WORK/ours.json" <<'PY'
import json, sys
for t in json.load(open(sys.argv[1]))["traces"]:
    a = t["analysis"]; d = a["devices"][0]
    print(f"rank {a['rank']}: idle {d['idle_us']:.1f} compute {d['compute_us']:.1f} non-compute {d['span_us'] - d['idle_us'] - d['compute_us']:.1f} span {d['span_us']:.1f}")
PY
echo "== HTA"
HTA_DISABLE_NS_ROUNDING=1 /usr/bin/time -f "wall %e s, peak RSS %M KB (the parent; HTA parses ranks in worker processes)" "$HTA_PY" - "$WORK/traces" <<'PY' 2>&1 | grep -v -i "warn\|parsed\|parsing\|leaving\|rounding"
import sys, time
t0 = time.time()
from hta.trace_analysis import TraceAnalysis
t1 = time.time()
a = TraceAnalysis(trace_dir=sys.argv[1])
tb = a.get_temporal_breakdown(visualize=False)
kb = a.get_gpu_kernel_breakdown(visualize=False)
t2 = time.time()
for _, r in tb.iterrows():
    print(f"rank {int(r['rank'])}: idle {r['idle_time(us)']:.1f} compute {r['compute_time(us)']:.1f} non-compute {r['non_compute_time(us)']:.1f} span {r['kernel_time(us)']:.1f}")
print(f"import {t1 - t0:.2f} s, load and analyse {t2 - t1:.2f} s")
PY
