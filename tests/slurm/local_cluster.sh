#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for the slurm-marked tests (and for trying
# `orchestrator slurm` by hand). Needs root and Debian's slurm-wlm + munge packages.
#   tests/slurm/local_cluster.sh start   # munged, slurmctld, slurmd; waits until the node is idle
#   tests/slurm/local_cluster.sh stop
# What it takes: a munge key under /etc/munge, munged running as user munge, a slurm.conf
# naming this host as controller and only node (all its CPUs, most of its memory), cgroup.conf
# with cgroup/v1 (slurmd refuses "disabled"), linuxproc process tracking and no task plugin.
set -euo pipefail
CONF_DIR=/etc/slurm
STATE=/var/lib/nodeground-slurm

start() {
  command -v slurmctld >/dev/null || { echo "slurm-wlm is not installed (apt-get install slurm-wlm munge)" >&2; exit 1; }
  local host cpus mem
  host=$(hostname)
  cpus=$(nproc)
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
  mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge "$STATE"/{ctld,d} /var/log/slurm "$CONF_DIR"
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  fi
  chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
  chmod 0700 /etc/munge /var/lib/munge /var/log/munge
  chmod 0400 /etc/munge/munge.key
  chmod 0755 /run/munge
  pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
  cat > "$CONF_DIR/slurm.conf" <<CONF
ClusterName=nodeground
SlurmctldHost=${host}
AuthType=auth/munge
CryptoType=crypto/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
SlurmUser=root
SlurmdUser=root
StateSaveLocation=${STATE}/ctld
SlurmdSpoolDir=${STATE}/d
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=3600
NodeName=${host} CPUs=${cpus} RealMemory=${mem} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  cat > "$CONF_DIR/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
IgnoreSystemd=yes
CONF
  pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
  pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
  for _ in $(seq 60); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
      sinfo
      return 0
    fi
    scontrol update nodename="${host}" state=resume >/dev/null 2>&1 || true
    sleep 1
  done
  echo "the SLURM node did not come up; see /var/log/slurm/" >&2
  tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
  exit 1
}

stop() {
  pkill -x slurmd || true
  pkill -x slurmctld || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
