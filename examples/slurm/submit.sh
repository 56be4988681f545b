#!/bin/bash
# Submits a sharded kvtune sweep to Slurm: an array of SHARDS tasks, then the merge job, which
# starts only when every task of the array succeeded.
#   examples/slurm/submit.sh SWEEP.toml OUT_DIR [SHARDS]
# KVTUNE (default: kvtune on PATH); SBATCH_OPTS: more sbatch options for both jobs (they override
# the scripts' #SBATCH lines), e.g. SBATCH_OPTS="--partition=cpu --cpus-per-task=32".
set -euo pipefail
sweep=$(realpath "$1")
out=$(realpath -m "$2")
shards=${3:-4}
here=$(dirname "$(realpath "$0")")
mkdir -p "$out"
export SWEEP="$sweep" OUT="$out" KVTUNE="${KVTUNE:-kvtune}"
# shellcheck disable=SC2086
array=$(sbatch --parsable --export=ALL ${SBATCH_OPTS:-} --array="0-$((shards - 1))" --chdir="$out" \
  "$here/sweep-array.sbatch")
array=${array%%;*}  # --parsable prints "JOBID[;CLUSTER]"
# shellcheck disable=SC2086
merge=$(sbatch --parsable --export=ALL ${SBATCH_OPTS:-} --dependency="afterok:$array" --chdir="$out" \
  "$here/merge.sbatch")
echo "array job $array ($shards shards), merge job ${merge%%;*}; results in $out/merged"
