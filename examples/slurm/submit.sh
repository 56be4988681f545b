#!/bin/bash
# Submits a sharded kvtune sweep to Slurm: an array of SHARDS tasks, then the merge job, which
# starts only when every task of the array succeeded (and is cancelled if one fails: see
# docs/scale-out.md for re-running a failed shard).
#   examples/slurm/submit.sh SWEEP.toml OUT_DIR [SHARDS]
# KVTUNE (default: kvtune on PATH); SBATCH_OPTS: more sbatch options for both jobs (they override
# the scripts' #SBATCH lines), e.g. SBATCH_OPTS="--partition=cpu --cpus-per-task=32";
# SBATCH_ARRAY_OPTS: for the array's tasks only (the merge runs on one CPU).
set -euo pipefail
out=$(realpath -m "$2")
shards=${3:-4}
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: SHARDS must be a positive integer, not '$shards'" >&2; exit 2; }
here=$(dirname "$(realpath "$0")")
mkdir -p "$out"
# The tasks may start hours apart: each reads this copy of the sweep, so an edit to the original
# meanwhile cannot give the shards different sweeps (which merge would refuse after the work).
cp "$1" "$out/sweep.toml"
kvtune=${KVTUNE:-kvtune}
[[ $kvtune == */* ]] && kvtune=$(realpath "$kvtune")  # the jobs run in $out (--chdir)
export SWEEP="$out/sweep.toml" OUT="$out" KVTUNE="$kvtune"
# shellcheck disable=SC2086
array=$(sbatch --parsable --export=ALL ${SBATCH_OPTS:-} ${SBATCH_ARRAY_OPTS:-} --array="0-$((shards - 1))" \
  --chdir="$out" "$here/sweep-array.sbatch")
array=${array%%;*}  # --parsable prints "JOBID[;CLUSTER]"
# --kill-on-invalid-dep: a failed task cancels the merge instead of leaving it pending for ever
# (sbatch(1): a dependency that can no longer be satisfied is never run, even after a requeue).
# shellcheck disable=SC2086
merge=$(sbatch --parsable --export=ALL ${SBATCH_OPTS:-} --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --chdir="$out" "$here/merge.sbatch")
echo "array job $array ($shards shards), merge job ${merge%%;*}; results in $out/merged"
