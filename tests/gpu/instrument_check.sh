#!/usr/bin/env bash
# GPU check of instrument_file's runtime helper (DEVELOPERS.md). Needs: the system-profile
# binary (SP, default target/release/system-profile), a Python with torch+CUDA (PY), an NVIDIA
# GPU. Writes the log, the ledger and a summary under OUT (default ./gpu-instrument-out).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
SP="${SP:-$here/../../target/release/system-profile}"
PY="${PY:-python3}"
OUT="${OUT:-$PWD/gpu-instrument-out}"
mkdir -p "$OUT"
root="$(mktemp -d)"
cp "$here/instrument_gpu.py" "$root/prog.py"
call() { "$SP" call --root "$root" --python "$PY" "$@"; }
call instrument_file '{"path":"prog.py","measure":"transfers","function":"copies","strategy":"decorator"}' > "$OUT/transfers.json"
call instrument_file '{"path":"prog.py","measure":"cuda_events","function":"kernels","strategy":"decorator"}' > "$OUT/cuda_events.json"
call instrument_file '{"path":"prog.py","measure":"memory","function":"kernels","strategy":"context"}' > "$OUT/memory.json"
call instrument_file '{"path":"prog.py","measure":"nccl","function":"reduce","strategy":"decorator"}' > "$OUT/nccl.json"
call instrument_file '{"path":"prog.py","measure":"duplicates","function":"main","strategy":"decorator"}' > "$OUT/duplicates.json"
(cd "$root" && "$PY" prog.py) > "$OUT/run.txt" 2>&1
cp "$root/profile_output/instrument/measure.jsonl" "$OUT/measure.jsonl"
cp "$root/profile_output/ledger.json" "$OUT/ledger.json"
call revert_changes '{"all": true}' > "$OUT/revert.json"
cmp "$root/prog.py" "$here/instrument_gpu.py" && echo "revert: byte-identical" | tee -a "$OUT/summary.txt"
"$PY" - "$OUT/measure.jsonl" <<'PYEOF' | tee -a "$OUT/summary.txt"
import collections, json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
kinds = collections.Counter(r["kind"] for r in recs)
print("records by kind:", dict(kinds))
for r in recs:
    if r["kind"] in ("transfer", "cuda_time", "collective", "duplicates", "note"):
        print(json.dumps(r)[:300])
PYEOF
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/gpu.csv" 2>&1 || true
"$PY" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())" > "$OUT/torch.txt" 2>&1 || true
