#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for tests/test_slurm.py (issue 41): munged, MariaDB,
# slurmdbd (so that `sacct` lists the jobs), slurmctld and slurmd, all started in the background
# without systemd and without cgroups. Needs root and Debian's slurm-wlm, slurmdbd, munge and
# mariadb-server (installed by .ci/run). Idempotent: a cluster already up is left as it is.
#
#   .ci/slurm_up.sh            # bring it up, wait until the node is idle (exit 1 with the reason otherwise)
#   .ci/slurm_up.sh --down     # stop what it started
#
# State and logs go to $DOGI_SLURM_STATE (default /var/tmp/dogi_slurm); the configuration to
# /etc/slurm (where sinfo, sbatch and sacct look for it).
set -euo pipefail

state="${DOGI_SLURM_STATE:-/var/tmp/dogi_slurm}"
timeout_s="${DOGI_SLURM_TIMEOUT:-120}"
cluster=dogi
node="$(hostname -s)"
db_socket=/run/mysqld/mysqld.sock

die() {
    echo "slurm_up: $*" >&2
    exit 1
}

stop_pidfile() {
    local pidfile=$1
    if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        kill "$(cat "$pidfile")" || true
    fi
    rm -f "$pidfile"
}

if [ "${1:-}" = "--down" ]; then
    stop_pidfile "$state/slurmd.pid"
    stop_pidfile "$state/slurmctld.pid"
    stop_pidfile "$state/slurmdbd.pid"
    stop_pidfile /run/mysqld/mysqld.pid
    stop_pidfile /run/munge/munged.pid
    exit 0
fi

[ "$(id -u)" = 0 ] || die "needs root (it starts munged, MariaDB and the SLURM daemons)"
for exe in munged mariadbd slurmdbd slurmctld slurmd sinfo sacct sacctmgr; do
    command -v "$exe" >/dev/null || [ -x "/usr/sbin/$exe" ] ||
        die "$exe not found: apt-get install slurm-wlm slurmdbd munge mariadb-server"
done
export PATH="$PATH:/usr/sbin"

node_idle() {
    [ "$(sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]
}

if node_idle && sacct -n -X -S now-1minutes >/dev/null 2>&1; then
    echo "slurm_up: node $node already idle, accounting up"
    exit 0
fi

mkdir -p "$state"/{ctld,spool,dbd}

# Wait for a condition (a shell command) up to $timeout_s seconds; on timeout print the log
# that explains it and fail.
wait_for() {
    local what=$1 check=$2 log=$3 waited=0
    until eval "$check"; do
        if [ "$waited" -ge "$timeout_s" ]; then
            echo "slurm_up: $what not ready after ${timeout_s}s; last lines of $log:" >&2
            tail -n 20 "$log" >&2 || true
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

# munge: the key is made once (Debian's package usually made it already), the daemon runs as the
# munge user as its service file would
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown -R munge:munge /etc/munge && chmod 700 /etc/munge && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n </dev/null >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
fi
wait_for munged "munge -n </dev/null | unmunge >/dev/null 2>&1" /var/log/munge/munged.log

# MariaDB for slurmdbd (the only accounting storage sacct reads in SLURM 22.05)
if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$state/mariadb-install.log" 2>&1 ||
        die "mariadb-install-db failed, see $state/mariadb-install.log"
fi
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
if ! mariadb-admin --socket="$db_socket" ping >/dev/null 2>&1; then
    nohup /usr/sbin/mariadbd --user=mysql --socket="$db_socket" --pid-file=/run/mysqld/mysqld.pid \
        --log-error="$state/mariadb.log" >/dev/null 2>&1 &
fi
wait_for MariaDB "mariadb-admin --socket=$db_socket ping >/dev/null 2>&1" "$state/mariadb.log"
mariadb --socket="$db_socket" <<'SQL'
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL

cat >/etc/slurm/slurmdbd.conf <<EOF
# Written by .ci/slurm_up.sh
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$state/slurmdbd.pid
LogFile=$state/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
chmod 600 /etc/slurm/slurmdbd.conf

# One node with the machine's real CPUs and memory (as slurmd -C reports them); process tracking
# and task plugins that need neither systemd nor cgroups; cores and memory as the consumable
# resources, so several small jobs share the node
hardware="$(slurmd -C | head -n 1 | sed 's/^NodeName=[^ ]* //')"
cat >/etc/slurm/slurm.conf <<EOF
# Written by .ci/slurm_up.sh: a one-node cluster without systemd or cgroups
ClusterName=$cluster
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MinJobAge=30
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$node $hardware State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF

if ! sacctmgr -n list cluster >/dev/null 2>&1; then
    slurmdbd
fi
wait_for slurmdbd "sacctmgr -n list cluster >/dev/null 2>&1" "$state/slurmdbd.log"
sacctmgr -i add cluster "$cluster" >/dev/null 2>&1 || true

if ! scontrol ping 2>/dev/null | grep -q UP; then
    slurmctld
fi
wait_for slurmctld "scontrol ping 2>/dev/null | grep -q UP" "$state/slurmctld.log"
if [ ! -s "$state/slurmd.pid" ] || ! kill -0 "$(cat "$state/slurmd.pid")" 2>/dev/null; then
    slurmd
fi
wait_for "node $node idle" node_idle "$state/slurmd.log"
# the cluster is registered once slurmctld has talked to slurmdbd; sacct then answers
wait_for "sacct" "sacct -n -X -S now-1minutes >/dev/null 2>&1" "$state/slurmctld.log"
echo "slurm_up: node $node idle ($hardware), accounting by slurmdbd; logs in $state"
