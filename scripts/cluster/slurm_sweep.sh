#!/bin/bash
# A sweep over a Slurm array: one task per GPU, each its shard of the shape list, all into one dataset folder
# on a file system every node sees (flock must work there; docs/datasets.md, "Sweeping"). Re-submitting the
# same array resumes: shapes already in the folder are skipped.
#   sbatch --array=0-7 scripts/cluster/slurm_sweep.sh gemm datasets/h200/gemm/shapes_heldout.json /shared/sweep/heldout h200
# then, anywhere:  rooftune eval gemm --data /shared/sweep/heldout --budget 20 --gpu h200
#SBATCH --job-name=rooftune-sweep
#SBATCH --gpus-per-task=1
#SBATCH --ntasks=1
#SBATCH --time=02:00:00
set -euo pipefail
kernel=$1 shapes=$2 out=$3 gpu=$4
index=${SLURM_ARRAY_TASK_ID:?run as a Slurm array task}
count=${SLURM_ARRAY_TASK_COUNT:?run as a Slurm array task}
minutes=${SWEEP_MINUTES:-110}   # under the job's time limit: a shard cut short resumes on re-submission
exec rooftune sweep "$kernel" --shapes "$shapes" --out "$out" --gpu "$gpu" --shard "$index/$count" \
    --max-minutes "$minutes"
