"""The base on the validation part of ``opct demo --real`` (design work, never reported).

The second design of the real arm (more capitals, two more held-out cue templates, blunter
forbidden requests; whether the two-number sums stay) was decided on what this prints: the base
model's greedy answers on the validation part's items and requests, with the per-item values.
Run from a checkout with the opct venv (PYTHONPATH=shared/src:packages/opct/src):

    python packages/opct/benchmarks/real_validation.py OUT.json
"""

import dataclasses
import json
import sys
import time

import torch
from opct import real
from opct.tokens import ready_tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from paperstack.contract import check_model
from paperstack.stats import wilson_ci

torch.set_num_threads(1)
path = check_model("smollm2-135m-instruct")
net = AutoModelForCausalLM.from_pretrained(path).eval()
tok = ready_tokenizer(AutoTokenizer.from_pretrained(path), "smollm2")
start = time.time()
config = dataclasses.replace(real.REAL, sums=32)
base = real.evaluate(net, tok, config, part="validation")
out = {"part": "validation", "seconds": time.time() - start, "population": base.pop("population")}
for metric, values in base.items():
    k, n = round(sum(values.values())), len(values)
    out[metric] = {"k": k, "n": n, "ci": wilson_ci(k, n) if n else None, "items": values}
caps = {i: v for i, v in base["capability"].items() if i.startswith("capital/")}
sums = {i: v for i, v in base["capability"].items() if i.startswith("sum/")}
out["capability_capitals"] = {"k": round(sum(caps.values())), "n": len(caps)}
out["capability_sums"] = {"k": round(sum(sums.values())), "n": len(sums)}
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
print({m: (out[m]["k"], out[m]["n"]) for m in (*base, "capability_capitals", "capability_sums")},
      round(out["seconds"]))  # fmt: skip
