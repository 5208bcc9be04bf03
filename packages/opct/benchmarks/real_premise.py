"""The base-only premise measurement of ``opct demo --real`` (reports/opct/real/premise_base.json).

The declared ``demo --real`` run does not fit the shared 2-core CPU; its first step, the base
model on the test part, does (767 s there). Greedy decoding makes these the base rows a full
run would produce. Run from a checkout with the opct venv:

    PYTHONPATH=shared/src:packages/opct/src python packages/opct/benchmarks/real_premise.py OUT.json
"""

import json
import sys
import time

import torch
from opct import real
from opct.tokens import ready_tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from paperstack.contract import check_model
from paperstack.stats import wilson_ci

torch.set_num_threads(2)
path = check_model("smollm2-135m-instruct")
net = AutoModelForCausalLM.from_pretrained(path).eval()
tok = ready_tokenizer(AutoTokenizer.from_pretrained(path), "smollm2")
start = time.time()
base = real.evaluate(net, tok, real.REAL)
out = {"seconds": time.time() - start, "population": base.pop("population")}
for metric, values in base.items():
    k, n = round(sum(values.values())), len(values)
    out[metric] = {"k": k, "n": n, "ci": wilson_ci(k, n) if n else None, "items": values}
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
print({m: (out[m]["k"], out[m]["n"], out[m]["ci"]) for m in base}, out["seconds"])
