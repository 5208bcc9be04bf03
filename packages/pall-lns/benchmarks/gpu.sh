#!/usr/bin/env bash
# GPU check of pall-lns, one command (< 8 min on a bare H200 with its preinstalled torch 2.11,
# triton 3.6, transformers 5.17, Python 3.12): the LM selector on CUDA agrees with the CPU, and
# `pall demo --quick --device cuda` runs the LM (fine-tuning and decisions) on the GPU while SCIP
# stays on the CPU; the same demo with `--device cpu` on the same machine is the baseline, and
# the LM's decision times on the same held-out states are compared pairwise. Writes to $OUT
# (default: reports/pall-lns/gpu). SCIP, HiGHS and trl are not preinstalled there and nothing
# can be downloaded: put their wheels (pyscipopt, highspy, trl, and what trl and the core need
# that is missing: datasets, dill, multiprocess, pydantic, pydantic-core, annotated-types,
# typing-inspection, platformdirs) in $WHEELS (default .whl/ in the checkout);
# tools/gpu-prelude.sh installs them first.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" pall-lns \
  pyscipopt highspy trl
gpu_tests 240
for device in cuda cpu; do
  timeout 200 "$PY" -m pall_lns.cli demo --quick --device "$device" --no-progress \
    --out "$OUT/demo-$device" 2>&1 | tail -20 | tee "$OUT/demo-$device.txt"
done
"$PY" - "$OUT" <<'PY' | tee "$OUT/decision-ms.txt"
import json
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])
ms = {}
for device in ("cuda", "cpu"):
    rows = json.loads((out / f"demo-{device}" / "results.json").read_text())["rows"]
    row = next(r for r in rows if r["metric"] == "decision_ms" and r["system"] == "lm")
    ms[device] = row["items"]
states = sorted(set(ms["cuda"]) & set(ms["cpu"]), key=int)
ratio = [ms["cuda"][s] / ms["cpu"][s] for s in states]
print(f"LM decision on {len(states)} held-out states: cuda median "
      f"{statistics.median(ms['cuda'][s] for s in states):.2f} ms, cpu median "
      f"{statistics.median(ms['cpu'][s] for s in states):.2f} ms, paired cuda/cpu ratio median "
      f"{statistics.median(ratio):.2f} (range {min(ratio):.2f}-{max(ratio):.2f})")
PY
