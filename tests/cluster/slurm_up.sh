#!/usr/bin/env bash
# Start a throwaway single-node SLURM cluster on loopback, for tests/cluster/test_slurm.py and CI.
#
#   sudo tests/cluster/slurm_up.sh          # root; Debian 12 (slurm-wlm 22.05); no systemd needed
#   tests/cluster/slurm_down.sh             # stops it again, by PID
#
# Idempotent: when the cluster is already up it says so and returns at once; when it is half up
# (a daemon died) it restarts the SLURM daemons from a clean job state.
#
# What it does
#   1. installs slurmctld, slurmd, slurm-client and munge with apt-get when they are missing
#      (a policy-rc.d that exits 101 keeps the packages' postinst from starting services);
#   2. writes /etc/slurm/slurm.conf (marked as written here; a slurm.conf this script did not write
#      is never overwritten) for cluster "growcertci": one node, this host, 127.0.0.1 only;
#   3. starts munged (unless one already answers), slurmctld and slurmd by hand;
#   4. waits, bounded, until the node is idle and a one-CPU `srun` runs.
# All state, spool, logs and PID files live in $GROWCERT_SLURM_DIR (default /tmp/growcert-slurm);
# the PID files in $GROWCERT_SLURM_DIR/run are what slurm_down.sh stops.
#
# Accounting: none (no slurmdbd, no MariaDB), so `sacct` does not work and Snakemake must use
# `--slurm-status-command squeue` (profiles/slurm sets it). Why not slurmdbd: with sacct as status
# command, snakemake-executor-plugin-slurm 2.8.0 reads a cancelled job's state "CANCELLED by 0" as
# still running and the workflow hangs for ever after `scancel`, which the test does on purpose;
# squeue reports plain "CANCELLED". MinJobAge=3600 keeps finished jobs visible to squeue for an
# hour (the plugin falls back to sacct when MinJobAge < 3 x its first status-check delay).
# Without slurmdbd the cluster also comes up ~8 s sooner and leaves no database behind.
set -euo pipefail

DIR=${GROWCERT_SLURM_DIR:-/tmp/growcert-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# Written by growcert tests/cluster/slurm_up.sh: throwaway single-node test cluster."
CLUSTER=growcertci
WAIT=60   # seconds allowed for each daemon to come up

say() { echo "slurm_up: $*"; }
die() { echo "slurm_up: error: $*" >&2; exit 1; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
node_ready() { timeout 10 sinfo -h -N -o %t 2>/dev/null | grep -qxE 'idle|mix|alloc'; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
munge_works() { command -v munge >/dev/null && timeout 5 munge -n 2>/dev/null | timeout 5 unmunge >/dev/null 2>&1; }
show_log() { [ -f "$1" ] && { echo "--- last lines of $1:" >&2; tail -n 20 "$1" >&2; }; return 0; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages, writes $CONF and starts daemons)"
started=$(date +%s)

# Fast path: everything already up.
if alive "$DIR/run/slurmctld.pid" && alive "$DIR/run/slurmd.pid" && munge_works && node_ready; then
  say "already up (cluster $CLUSTER, state in $DIR)"
  exit 0
fi

# 1. Packages.
missing=()
for tool in slurmctld slurmd sbatch munged; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get: install SLURM (slurmctld, slurmd, client commands) and munge"
  say "installing slurmctld slurmd slurm-client munge with apt-get (missing: ${missing[*]})"
  created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && created_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  mkdir -p "$DIR/log"; apt_log="$DIR/log/apt.log"; apt_ok=1
  { apt-get update -qq -o Acquire::Retries=3 &&
    apt-get install -y -qq --no-install-recommends -o Acquire::Retries=3 slurmctld slurmd slurm-client munge
  } >"$apt_log" 2>&1 || apt_ok=0
  [ $created_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ $apt_ok = 1 ] || { tail -n 20 "$apt_log" >&2; die "apt-get could not install slurmctld slurmd slurm-client munge (full output: $apt_log)"; }
fi

# 2. Directories and slurm.conf.
if [ -e "$CONF" ] && ! head -n 1 "$CONF" | grep -qxF "$MARK"; then
  die "$CONF exists and was not written by this script: this machine has its own SLURM configuration; refusing to replace it"
fi
# Stop our own leftovers (a half-up cluster) before starting again; never touch foreign daemons.
for name in slurmd slurmctld; do
  if alive "$DIR/run/$name.pid"; then
    pid=$(cat "$DIR/run/$name.pid"); say "stopping leftover $name (pid $pid)"
    kill -TERM "$pid"; for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$DIR/run/$name.pid"
done
for port in 6817 6818; do
  port_open $port && die "port $port on 127.0.0.1 is in use by a process this script did not start (another slurmctld/slurmd?)"
done

rm -rf "$DIR/state" "$DIR/spool"   # a fresh start is a fresh job state
mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run" /etc/slurm
chmod 0755 "$DIR"
chown slurm:slurm "$DIR/state" "$DIR/log" "$DIR/run"

host=$(hostname -s)
cpus=$(nproc)
memory_mb=$(( $(awk '/^MemTotal/ {print $2}' /proc/meminfo) / 1024 - 2048 ))   # leave 2 GB to the system
[ "$memory_mb" -ge 2048 ] || die "only $((memory_mb + 2048)) MB of memory; the test cluster needs at least 4 GB"

cat > "$CONF.tmp" <<EOF
$MARK
# Stop it with tests/cluster/slurm_down.sh; state, logs and PID files are in $DIR.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
# Bind to loopback only (otherwise the daemons listen on 0.0.0.0).
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# No cgroups in a container: track processes by parent PID, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# No accounting database; finished jobs stay in squeue for an hour (the status command is squeue).
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=3600
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# A job without --mem would otherwise get the whole node and serialise every job.
DefMemPerCPU=1000
ReturnToService=2
# Cancelled jobs get SIGKILL 5 s after SIGTERM (default 30 s).
KillWait=5
MailProg=/bin/true
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
mv "$CONF.tmp" "$CONF"

# 3. munge: reuse one that answers (it may belong to the system), else start our own.
if munge_works; then
  say "munged already answers; using it"
else
  [ -s /etc/munge/munge.key ] || { say "creating /etc/munge/munge.key"; mungekey --create --keyfile=/etc/munge/munge.key; }
  chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge && chmod 0755 /run/munge
  rm -f /run/munge/munged.pid
  # --force: a socket left by a munged that was killed does not stop the start (none answers, checked above).
  runuser -u munge -- /usr/sbin/munged --force || die "munged did not start (see /var/log/munge/munged.log)"
  for _ in $(seq $((WAIT * 5))); do munge_works && break; sleep 0.2; done
  munge_works || { show_log /var/log/munge/munged.log; die "munged started but munge -n | unmunge fails"; }
  cp /run/munge/munged.pid "$DIR/run/munged.pid"   # recorded: slurm_down.sh stops only what we started
  say "munged started (pid $(cat "$DIR/run/munged.pid"))"
fi

# 4. slurmctld, then slurmd; both daemonize and write their PID files into $DIR/run.
/usr/sbin/slurmctld -c || { show_log "$DIR/log/slurmctld.log"; die "slurmctld did not start"; }
for _ in $(seq $((WAIT * 5))); do timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.2; done
timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP' || { show_log "$DIR/log/slurmctld.log"; die "slurmctld does not answer scontrol ping after ${WAIT} s"; }
say "slurmctld started (pid $(cat "$DIR/run/slurmctld.pid"))"

/usr/sbin/slurmd || { show_log "$DIR/log/slurmd.log"; die "slurmd did not start"; }
for _ in $(seq $((WAIT * 2))); do node_ready && break; sleep 0.5; done
node_ready || { sinfo -N >&2 || true; show_log "$DIR/log/slurmd.log"; show_log "$DIR/log/slurmctld.log"; die "node $host is not idle after ${WAIT} s"; }
say "slurmd started (pid $(cat "$DIR/run/slurmd.pid"))"

timeout $WAIT srun --quiet -N 1 -n 1 -t 1 true || { show_log "$DIR/log/slurmd.log"; die "a one-CPU srun did not run"; }
say "up in $(( $(date +%s) - started )) s: cluster $CLUSTER, node $host ($cpus CPUs, $memory_mb MB), partition debug"
