#!/bin/bash
# A real one-node Slurm cluster on this machine, for the tests: munged, slurmctld and slurmd
# (Debian's slurm-wlm and munge), configured in a folder of its own on ports of its own.
#
#   tests/cluster/slurm.sh start DIR CTLD_PORT SLURMD_PORT   # prints SLURM_CONF=DIR/slurm.conf
#   tests/cluster/slurm.sh stop DIR
#
# Two nodes, n1 and n2, both this machine (one slurmd each, on SLURMD_PORT and the next port:
# Debian's build allows several per host), each with the CPUs the kernel counts,
# processes tracked through /proc (no cgroup plugin: containers often have no delegated
# cgroup), oversubscription allowed so a test's job and the profiler's steps share the CPUs.
set -euo pipefail
cmd=${1:?start or stop}
dir=${2:?folder}
case "$cmd" in
start)
  ctld_port=${3:?slurmctld port}
  slurmd_port=${4:?slurmd port}
  for p in munged slurmctld slurmd sbatch srun scontrol; do
    command -v "$p" >/dev/null || { echo "$p is not installed (apt-get install slurm-wlm munge)" >&2; exit 3; }
  done
  mkdir -p "$dir"/{state,spool,log}
  node=$(hostname -s)
  cpus=$(nproc)
  mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
  cat > "$dir/slurm.conf" <<CONF
ClusterName=sptest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=$(id -un)
SlurmdUser=root
SlurmctldPort=$ctld_port
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
NodeName=n1 NodeHostname=$node NodeAddr=127.0.0.1 Port=$slurmd_port CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
NodeName=n2 NodeHostname=$node NodeAddr=127.0.0.1 Port=$((slurmd_port + 1)) CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
  if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown -R munge:munge /run/munge /var/lib/munge /var/log/munge /etc/munge 2>/dev/null || true
    if [ ! -s /etc/munge/munge.key ]; then
      dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
      chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    fi
    runuser -u munge -- munged
  fi
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF" >>"$dir/log/slurmctld.out" 2>&1
  slurmd -N n1 -f "$SLURM_CONF" >>"$dir/log/slurmd.out" 2>&1
  slurmd -N n2 -f "$SLURM_CONF" >>"$dir/log/slurmd.out" 2>&1
  for _ in $(seq 1 120); do
    if [ "$(sinfo -h -N -o %t 2>/dev/null | grep -cx idle)" = 2 ]; then
      echo "SLURM_CONF=$SLURM_CONF"
      exit 0
    fi
    sleep 0.5
  done
  echo "the cluster did not come up; logs in $dir/log" >&2
  tail -5 "$dir/log/"*.log >&2 || true
  exit 1
  ;;
stop)
  for f in slurmd-n1 slurmd-n2 slurmctld; do
    [ -f "$dir/$f.pid" ] && kill "$(cat "$dir/$f.pid")" 2>/dev/null || true
  done
  ;;
*) echo "start or stop" >&2; exit 2 ;;
esac
