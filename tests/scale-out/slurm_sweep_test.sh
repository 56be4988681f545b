#!/usr/bin/env bash
# Issue #17 item 5, for real: a single-node Slurm cluster on localhost (Debian's slurmctld, slurmd
# and munge, installed when missing, started here on their own ports, socket and state directory,
# stopped at the end), a 4-task job array running `kvtune sweep --shard auto`, a merge job that
# depends on it, and the merged records compared with an unsharded run's: equal except time, host
# and the shard fields. Needs root (or sudo) for apt and the daemons.
#   tests/scale-out/slurm_sweep_test.sh KVTUNE_BINARY
set -euo pipefail
kvtune=$(realpath "$1")
here=$(dirname "$(realpath "$0")")
examples=$(realpath "$here/../../examples/slurm")
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo -n"

packages=(slurmctld slurmd slurm-client munge python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "slurm test: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work=$(mktemp -d /tmp/kvtune-slurm.XXXXXX)
chmod 755 "$work"
mkdir -p "$work/munge" "$work/spool/ctld" "$work/spool/d" "$work/log" "$work/out"
$sudo chown munge:munge "$work/munge"
# Our own munge key, socket and pid file: a munged or Slurm already on this machine is not touched.
$sudo dd if=/dev/urandom of="$work/munge/munge.key" bs=1 count=1024 status=none
$sudo chown munge:munge "$work/munge/munge.key"
$sudo chmod 400 "$work/munge/munge.key"
export SLURM_CONF="$work/slurm.conf"
cleanup() {
  if [ -f "$work/slurmctld.pid" ]; then
    $sudo env SLURM_CONF="$SLURM_CONF" timeout 10 scontrol shutdown >/dev/null 2>&1 || true
    sleep 1
  fi
  for pid in "$work/slurmctld.pid" "$work/slurmd.pid" "$work/munge/munged.pid"; do
    [ -f "$pid" ] && $sudo kill "$(cat "$pid")" 2>/dev/null || true
  done
  if [ "${keep:-0}" = 1 ]; then echo "slurm test: logs kept in $work"; else $sudo rm -rf "$work"; fi
}
trap cleanup EXIT
keep=1  # until the end: a failure leaves the logs

# --force: munged refuses a key below a directory its user does not own (path_is_secure in munge's
# src/munged/path.c), and under sudo $work belongs to the caller. This munged serves this test only.
$sudo runuser -u munge -- /usr/sbin/munged --force --socket="$work/munge/munge.sock" \
  --key-file="$work/munge/munge.key" --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
  --seed-file="$work/munge/munged.seed"

# Ports away from Slurm's defaults (6817/6818), so a real cluster's daemons are not in the way.
cat >"$SLURM_CONF" <<CONF
ClusterName=kvtune-test
SlurmctldHost=localhost
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.sock
StateSaveLocation=$work/spool/ctld
SlurmdSpoolDir=$work/spool/d
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
NodeName=localhost CPUs=$(nproc --all) State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
# slurmd reads cgroup.conf beside slurm.conf (cgroup.conf(5)). On a cgroup v2 host without systemd
# it cannot start unless told: Slurm 24.05+ takes CgroupPlugin=disabled, older ones IgnoreSystemd.
version=$(slurmd -V | awk '{print $2}')
if [ "$(printf '%s\n24.05\n' "$version" | sort -V | head -1)" = 24.05 ]; then
  echo "CgroupPlugin=disabled" >"$work/cgroup.conf"
else
  echo "IgnoreSystemd=yes" >"$work/cgroup.conf"
fi
$sudo env SLURM_CONF="$SLURM_CONF" slurmctld
$sudo env SLURM_CONF="$SLURM_CONF" slurmd
for _ in $(seq 30); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 1
done
sinfo -h -o %t | grep -q idle || { echo "slurm test: the node never became idle"; cat "$work/log/"*.log; exit 1; }

# The examples' own scripts submit the array and the dependent merge job. CI is unset for the jobs
# (sbatch passes this environment on), so the shards log their progress as they would on a cluster.
cp "$here/small.toml" "$work/sweep.toml"
env -u CI KVTUNE="$kvtune" SBATCH_OPTS="--cpus-per-task=1" "$examples/submit.sh" "$work/sweep.toml" "$work/out" 4
deadline=$((SECONDS + 300))
while true; do
  queued=$(squeue -h -o %i) || { echo "slurm test: squeue failed"; cat "$work/log/"*.log; exit 1; }
  [ -n "$queued" ] || break
  [ $SECONDS -lt $deadline ] || { echo "slurm test: jobs still queued after 300 s"; squeue; cat "$work/out/"*.log; exit 1; }
  sleep 1
done
for a in 0 1 2 3; do
  grep -q "kvtune sweep shard $a/4: evaluating 9/9 points (100%)" "$work/out/kvtune-shard-$a.log" ||
    { echo "slurm test: shard $a logged no final progress line:"; cat "$work/out/kvtune-shard-$a.log"; exit 1; }
done
[ -s "$work/out/merged/results.jsonl" ] || { echo "slurm test: no merged results"; cat "$work/out/"*.log; exit 1; }
grep -q "Pareto frontier" "$work/out/kvtune-merge.log" || { echo "slurm test: the merge job did not report"; exit 1; }

"$kvtune" sweep "$work/sweep.toml" --out "$work/unsharded" >/dev/null
python3 - "$work/out/merged/results.jsonl" "$work/unsharded/results.jsonl" <<'PY'
import json, sys
from collections import Counter
# The record lists, in order, without the four fields a shard may change (each must be there).
def records(path):
    out, shards = [], Counter()
    for line in open(path):
        r = json.loads(line)
        for key in ("time", "host", "shard", "shards"):
            assert key in r, f"{path}: a record without '{key}'"
        shards[(r.pop("shard"), r.pop("shards"))] += 1
        del r["time"], r["host"]
        out.append(json.dumps(r, sort_keys=True))
    return out, shards
merged, merged_shards = records(sys.argv[1])
single, single_shards = records(sys.argv[2])
assert len(single) == 36, len(single)
assert len(merged) == len(single), f"{len(merged)} merged records for {len(single)} points"
diff = [i for i in range(len(single)) if merged[i] != single[i]]
assert not diff, f"{len(diff)} records differ, the first at line {diff[0] + 1}: {merged[diff[0]]} vs {single[diff[0]]}"
# Each merged record keeps the shard that evaluated it: 9 points each of 4 shards (i mod 4).
assert merged_shards == Counter({(s, 4): 9 for s in range(4)}), merged_shards
assert single_shards == Counter({(0, 1): 36}), single_shards
print(f"slurm test: {len(single)} merged records equal the unsharded run's, in order (time, host, shard aside)")
PY
cmp "$work/out/merged/frontier.csv" "$work/unsharded/frontier.csv" ||
  { echo "slurm test: the merged frontier.csv differs from the unsharded run's"; exit 1; }
# The tasks read the copy submit.sh made, not the file given.
cmp "$work/sweep.toml" "$work/out/sweep.toml" || { echo "slurm test: submit.sh made no copy of the sweep"; exit 1; }
keep=0
