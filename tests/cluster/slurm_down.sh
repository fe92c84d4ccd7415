#!/usr/bin/env bash
# Stop the throwaway SLURM cluster started by tests/cluster/slurm_up.sh.
#
#   sudo tests/cluster/slurm_down.sh            # stop daemons, keep logs in $GROWCERT_SLURM_DIR/log
#   sudo tests/cluster/slurm_down.sh --purge    # also delete $GROWCERT_SLURM_DIR
#
# Idempotent: with nothing running it says so and exits 0. It stops only the processes whose PIDs
# slurm_up.sh recorded in $GROWCERT_SLURM_DIR/run (slurmd, slurmctld, and munged only if slurm_up.sh
# started it), SIGTERM first, SIGKILL after 10 s. Jobs still in the cluster are cancelled first so no
# job step outlives slurmd. /etc/slurm/slurm.conf is removed when slurm_up.sh wrote it, so that
# client commands fail at once ("Could not establish a configuration source") instead of waiting for
# a controller that is gone.
set -uo pipefail

DIR=${GROWCERT_SLURM_DIR:-/tmp/growcert-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# Written by growcert tests/cluster/slurm_up.sh: throwaway single-node test cluster."
PURGE=0
case "${1:-}" in
  --purge) PURGE=1 ;;
  "") ;;
  *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac

say() { echo "slurm_down: $*"; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
ours() { [ -f "$CONF" ] && head -n 1 "$CONF" | grep -qxF "$MARK"; }

[ "$(id -u)" = 0 ] || { echo "slurm_down: error: must run as root (the daemons run as root and slurm)" >&2; exit 1; }

stopped=0
# Cancel whatever is still queued or running in our cluster (bounded), then let job steps exit.
if ours && alive "$DIR/run/slurmctld.pid"; then
  jobs=$(timeout 10 squeue -h -t pending,running,suspended,completing -o %i 2>/dev/null | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    say "cancelling jobs: $jobs"
    # shellcheck disable=SC2086
    timeout 10 scancel $jobs 2>/dev/null
    for _ in $(seq 20); do
      [ -z "$(timeout 5 squeue -h -t running,completing -o %i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
fi

for name in slurmd slurmctld munged; do
  file="$DIR/run/$name.pid"
  if alive "$file"; then
    pid=$(cat "$file")
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid"; say "killed $name (pid $pid) after 10 s"
    else
      say "stopped $name (pid $pid)"
    fi
    stopped=$((stopped + 1))
  fi
  rm -f "$file"
done

if ours; then rm -f "$CONF"; say "removed $CONF"; fi
[ $stopped = 0 ] && say "nothing was running"
if [ $PURGE = 1 ]; then rm -rf "$DIR"; say "removed $DIR"; elif [ -d "$DIR/log" ]; then say "logs kept in $DIR/log"; fi
exit 0
