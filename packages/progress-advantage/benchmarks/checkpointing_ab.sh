#!/bin/bash
# RLOO on SmolLM2 (benchmarks/real_cost_slice.py, validation seed 100, 3 steps, one thread) with
# trl's default activation checkpointing (OLD: a checkout before trl_precision_args, e.g.
# a7aa3d9) and without (NEW: this checkout), alternating OLD, NEW twice. Outputs
# validation/checkpointing_ab/{old,new}-{1,2}.json. Run from the repository root with the
# progress-advantage venv's python as PY:
#   PY=.nox/tests-package-progress-advantage/bin/python OLD=/tmp/wt-old bash packages/progress-advantage/benchmarks/checkpointing_ab.sh
set -euo pipefail
NEW=$(pwd)
for round in 1 2; do
  for side in old new; do
    if [ "$side" = old ]; then w=$OLD; else w=$NEW; fi
    (cd "$w" && PYTHONPATH="$w/shared/src:$w/packages/progress-advantage/src" OMP_NUM_THREADS=1 \
      "$NEW/$PY" packages/progress-advantage/benchmarks/real_cost_slice.py --steps 3 \
      --mc-trajectories 1 --out "/tmp/pa_ab/$side-$round")
    mkdir -p "$NEW/packages/progress-advantage/benchmarks/validation/checkpointing_ab"
    cp "/tmp/pa_ab/$side-$round/cost.json" \
      "$NEW/packages/progress-advantage/benchmarks/validation/checkpointing_ab/$side-$round.json"
  done
done
