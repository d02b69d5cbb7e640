#!/bin/bash
# A real two-node Ray cluster on this machine, for the tests: `ray start --head` and a second
# `ray start --address` (node_a and node_b: a custom resource each, so a test can place actors
# on either), its files under DIR, on ports of its own from PORT (GCS PORT, dashboard PORT+1,
# node manager PORT+2, object manager PORT+3, workers PORT+100..PORT+299).
#
#   tests/cluster/ray.sh start DIR PORT    # prints RAY_ADDRESS=127.0.0.1:PORT
#   tests/cluster/ray.sh stop DIR          # ends the processes whose command line names DIR
set -euo pipefail
cmd=${1:?start or stop}
dir=${2:?folder}
case "$cmd" in
start)
  port=${3:?port}
  command -v ray >/dev/null || { echo "ray is not installed (pip install 'ray[default]')" >&2; exit 3; }
  mkdir -p "$dir"
  common=(--num-cpus=1 --disable-usage-stats --temp-dir="$dir")
  ray start --head --node-ip-address=127.0.0.1 --port="$port" --dashboard-host=127.0.0.1 \
    --dashboard-port=$((port + 1)) --resources='{"node_a": 1}' \
    --min-worker-port=$((port + 100)) --max-worker-port=$((port + 199)) "${common[@]}" \
    >"$dir/head.log" 2>&1 || { tail -5 "$dir/head.log" >&2; exit 1; }
  ray start --address="127.0.0.1:$port" --node-ip-address=127.0.0.1 --resources='{"node_b": 1}' \
    --node-manager-port=$((port + 2)) --object-manager-port=$((port + 3)) \
    --min-worker-port=$((port + 200)) --max-worker-port=$((port + 299)) "${common[@]}" \
    >"$dir/worker.log" 2>&1 || { tail -5 "$dir/worker.log" >&2; exit 1; }
  echo "RAY_ADDRESS=127.0.0.1:$port"
  ;;
stop)
  # Not this script: its own command line names DIR too.
  others() { pgrep -f -- "$dir" | grep -vx "$$" || true; }
  for p in $(others); do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 1 20); do [ -z "$(others)" ] && exit 0; sleep 0.5; done
  for p in $(others); do kill -9 "$p" 2>/dev/null || true; done
  ;;
*) echo "start or stop" >&2; exit 2 ;;
esac
