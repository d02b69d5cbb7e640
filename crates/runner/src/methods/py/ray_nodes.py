"""cluster_nodes on a Ray cluster, through Ray: read the nodes and the live actors with Ray's
state API, place one NodePart actor on every node that runs some (NodeAffinitySchedulingStrategy,
hard), with system-profile's binary shipped in its runtime environment, and talk to the binary's
`node` part there over its stdin/stdout exchange: clock readings (the driver times each call),
then the observation. Prints one JSON line per node: {"node", "node_id", "readings":
[[sent, node_ns, received], ...], "observation": {...}} or {"node", "error"}.

    python ray_nodes.py '{"job": "02000000" | "", "binary": "/path/system-profile",
                          "window_s": 20, "rate_hz": 20, "out_dir": "...", "readings": 7}'
"""
import json
import os
import shutil
import sys
import tempfile
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from ray.util.state import list_actors, list_nodes

request = json.loads(sys.argv[1])
# The binary travels in this job's runtime environment (a working_dir Ray uploads once and
# unpacks on every node that runs one of its actors).
ship = tempfile.mkdtemp(prefix="system-profile-ship-")
try:
    os.link(request["binary"], os.path.join(ship, "system-profile"))
except OSError:
    shutil.copy2(request["binary"], os.path.join(ship, "system-profile"))
try:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), logging_level="ERROR",
             log_to_driver=False, runtime_env={"working_dir": ship})
finally:
    # Uploaded (or refused) by now: the local copy has done its work.
    shutil.rmtree(ship, ignore_errors=True)
own_job = ray.get_runtime_context().get_job_id()

nodes = [n for n in list_nodes(limit=10000) if n.state == "ALIVE"]
actors = [
    a for a in list_actors(filters=[("state", "=", "ALIVE")], limit=10000, detail=True)
    if a.job_id != own_job and (not request["job"] or a.job_id == request["job"]) and a.pid
]
actors.sort(key=lambda a: (a.class_name or "", a.actor_id))
# A node's name: Ray gives none of its own beyond an IP several nodes may share.
names = {n.node_id: ("head-" if n.is_head_node else "node-") + n.node_id[:8] for n in nodes}


@ray.remote(num_cpus=0)
class NodePart:
    def __init__(self, pids, window_s, rate_hz, out_dir):
        import subprocess

        binary = os.path.join(os.getcwd(), "system-profile")
        os.chmod(binary, 0o755)
        arg = ",".join(f"{pid}:{rank}:{label.replace(',', ' ')}" for pid, rank, label in pids)
        self.proc = subprocess.Popen(
            [binary, "node", "--pids", arg, "--window-s", str(window_s), "--rate-hz",
             str(rate_hz), "--out", out_dir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        while self.proc.stdout.readline().strip() != "ready":
            if self.proc.poll() is not None:
                raise RuntimeError("the node part ended before it was ready")

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()


parts = {}
for n in nodes:
    mine = [(a.pid, rank, f"{a.class_name} {a.actor_id[:8]}")
            for rank, a in enumerate(actors) if a.node_id == n.node_id]
    if not mine:
        continue
    env = {"SYSTEM_PROFILE_NODE": names[n.node_id]}
    if os.environ.get("SYSTEM_PROFILE_CLOCK_SKEW_NS"):
        env["SYSTEM_PROFILE_CLOCK_SKEW_NS"] = os.environ["SYSTEM_PROFILE_CLOCK_SKEW_NS"]
    parts[n.node_id] = NodePart.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n.node_id, soft=False),
        runtime_env={"env_vars": env},
    ).remote(mine, request["window_s"], request["rate_hz"],
             os.path.join(request["out_dir"], names[n.node_id]))

readings = {}
for node_id, part in parts.items():
    try:
        got = []
        for _ in range(request["readings"]):
            sent = time.time()
            line = ray.get(part.ask.remote("clock"), timeout=120)
            got.append([sent, int(line.split()[1]), time.time()])
        readings[node_id] = got
    except Exception as e:  # a node that cannot start the part is that node's error
        print(json.dumps({"node": names[node_id], "node_id": node_id, "error": str(e)}), flush=True)
observations = {node_id: parts[node_id].ask.remote("observe") for node_id in readings}
for node_id, ref in observations.items():
    try:
        line = ray.get(ref, timeout=request["window_s"] + 120)
        out = {"node": names[node_id], "node_id": node_id, "readings": readings[node_id],
               "observation": json.loads(line.split(" ", 1)[1])}
    except Exception as e:
        out = {"node": names[node_id], "node_id": node_id, "error": str(e)}
    print(json.dumps(out), flush=True)
if not parts:
    print(json.dumps({"node": "", "error": f"no live actor of {'job ' + request['job'] if request['job'] else 'the cluster'} on any of {len(nodes)} node(s)"}), flush=True)
