#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for the slurm-marked tests (and for trying
# `orchestrator slurm` by hand). Needs root and Debian's slurm-wlm + munge packages; with
# slurmdbd and mariadb-server installed too it keeps job accounting, so `sacct` answers.
#   tests/slurm/local_cluster.sh start   # munged, [mariadbd, slurmdbd,] slurmctld, slurmd; waits until the node is idle
#   tests/slurm/local_cluster.sh stop
# What it takes: a munge key under /etc/munge, munged running as user munge, a slurm.conf
# naming this host as controller and only node (all its CPUs, most of its memory), cgroup.conf
# with cgroup/v1 (slurmd refuses "disabled"), linuxproc process tracking and no task plugin.
# Accounting: a MariaDB data directory under the state directory, served on 127.0.0.1 only,
# and slurmdbd in front of it (the cluster registered with sacctmgr).
set -euo pipefail
CONF_DIR=/etc/slurm
STATE=/var/lib/nodeground-slurm
DB_PORT="${NODEGROUND_SLURM_DB_PORT:-3307}"
DB_PASS=nodeground-local  # a loopback-only database of this test cluster's job records

accounting_available() {
  [ -x /usr/sbin/slurmdbd ] && [ -x /usr/sbin/mariadbd ] && command -v mariadb-install-db >/dev/null
}

running() {  # running PIDFILE: the process the pid file names is alive
  [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

start_accounting() {
  local db="$STATE/mysql"
  if [ ! -d "$db/data/mysql" ]; then
    mkdir -p "$db"
    mariadb-install-db --user=mysql --datadir="$db/data" --auth-root-authentication-method=socket \
      --skip-test-db >"$db/install.log" 2>&1 || { cat "$db/install.log" >&2; exit 1; }
  fi
  chown -R mysql:mysql "$db"
  if ! running "$db/mysqld.pid"; then
    /usr/sbin/mariadbd --user=mysql --datadir="$db/data" --socket="$db/mysqld.sock" --pid-file="$db/mysqld.pid" \
      --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve --innodb-buffer-pool-size=32M \
      --log-error="$db/error.log" >/dev/null 2>&1 &
  fi
  for _ in $(seq 60); do
    mariadb --socket="$db/mysqld.sock" -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 1
  done
  mariadb --socket="$db/mysqld.sock" -e "
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '${DB_PASS}';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
  cat > "$CONF_DIR/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=${DB_PORT}
StorageUser=slurm
StoragePass=${DB_PASS}
StorageLoc=slurm_acct_db
PidFile=/run/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
CONF
  chmod 0600 "$CONF_DIR/slurmdbd.conf"
  running /run/slurmdbd.pid || /usr/sbin/slurmdbd
  for _ in $(seq 60); do
    sacctmgr -n list cluster >/dev/null 2>&1 && break
    sleep 1
  done
  sacctmgr -n list cluster format=cluster | grep -qw nodeground || sacctmgr -i add cluster nodeground >/dev/null
}

start() {
  command -v slurmctld >/dev/null || { echo "slurm-wlm is not installed (apt-get install slurm-wlm munge)" >&2; exit 1; }
  local host cpus mem accounting
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
  if accounting_available; then
    accounting="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost"
  else
    echo "slurmdbd or mariadb-server is not installed: no job accounting (sacct will not answer)" >&2
    accounting="AccountingStorageType=accounting_storage/none"
  fi
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
${accounting}
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
  if accounting_available; then start_accounting; fi  # sacctmgr reads slurm.conf: after it is written
  running /run/slurmctld.pid || /usr/sbin/slurmctld
  running /run/slurmd.pid || /usr/sbin/slurmd
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

stop_pid() {  # stop_pid PIDFILE: end the daemon it names and wait (at most 30 s) for it to go
  running "$1" || return 0
  local pid
  pid=$(cat "$1")
  kill "$pid"
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
}

stop() {
  stop_pid /run/slurmd.pid
  stop_pid /run/slurmctld.pid
  stop_pid /run/slurmdbd.pid
  stop_pid "$STATE/mysql/mysqld.pid"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
