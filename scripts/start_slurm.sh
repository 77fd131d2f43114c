#!/usr/bin/env bash
# Starts a real Slurm 22.05 cluster on loopback for the peers tier (../shared/PEERS.md): munged (shared
# with anything else on the machine, started only when not running), one slurmctld and two slurmd
# processes as two virtual nodes, n1 and n2, each with 1 CPU, under DIR, on free ports. Waits until
# both nodes are idle, then prints the environment a client needs (eval it): SLURM_CONF, SLURM_DIR.
# Stop with: scripts/start_slurm.sh --stop DIR (leaves munged running).
# Usage: scripts/start_slurm.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --stop ]; then
  D=$(readlink -f "$2")
  if [ -f "$D/slurm.conf" ]; then
    SLURM_CONF=$D/slurm.conf scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
  fi
  for pidf in "$D"/run/slurmd-n1.pid "$D"/run/slurmd-n2.pid "$D"/run/slurmctld.pid; do
    [ -f "$pidf" ] || continue
    p=$(cat "$pidf")
    kill "$p" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  exit 0
fi
D=$(readlink -f "${1:?usage: start_slurm.sh DIR}")
for b in munge munged slurmctld slurmd sbatch squeue scontrol sinfo; do
  command -v $b >/dev/null || [ -x /usr/sbin/$b ] || { echo "start_slurm: $b is missing: run scripts/setup.sh" >&2; exit 2; }
done
# munge: the key comes with Debian's package; one munged serves every client on the machine. Whether
# one answers is asked of munge itself (a killed munged can linger as a zombie that pgrep would count);
# --force: one killed without cleaning up leaves its socket and lock behind.
if ! munge -n </dev/null >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge: /run/munge
  runuser -u munge -- /usr/sbin/munged --force
  for _ in $(seq 1 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n </dev/null >/dev/null 2>&1 ||
    { echo "start_slurm: munged does not answer (see /var/log/munge/munged.log)" >&2; exit 1; }
fi
rm -rf "$D" && mkdir -p "$D"/run "$D"/log "$D"/ctld "$D"/spool
read -r CTLD_PORT P1 P2 <<<"$(scripts/free_port.sh 3)"
user=$(id -un)
cat >"$D/slurm.conf" <<CONF
ClusterName=anneal-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$D/ctld
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=1
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=600
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$P1 CPUs=1 RealMemory=4000 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$P2 CPUs=1 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$D/slurm.conf
/usr/sbin/slurmctld -i -f "$SLURM_CONF"
/usr/sbin/slurmd -N n1 -f "$SLURM_CONF"
/usr/sbin/slurmd -N n2 -f "$SLURM_CONF"
for _ in $(seq 1 150); do
  [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')" = 2 ] && break
  sleep 0.1
done
if [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')" != 2 ]; then
  echo "start_slurm: the two nodes did not become idle in 15 s:" >&2
  sinfo -N >&2 || true
  tail -5 "$D"/log/*.log >&2 || true
  exit 1
fi
echo "export SLURM_CONF=$SLURM_CONF SLURM_DIR=$D"
