"""Which Countdown variant does the base SmolLM2-135M-Instruct solve sometimes? (issue #50 item 1)

A design probe on VALIDATION problems only (training split, seed
``mosa_rl.demo.VALIDATION_PROBLEM_SEED``; no held-out problem, no reported seed): the base
model samples ``--samples`` completions at temperature 1 for each of ``--problems`` problems of
every variant (a task configuration and a prompt style of ``mosa_rl.demo.pose``), scored by the
core's Countdown verifier exactly as ``demo --real`` scores them (completion cut at a fallback
turn, last line or ``<answer>`` tag). Prints, per variant, pass@1 and unbiased pass@k for
k = 1..samples, the problems solved at least once, the CPU seconds, and two completions.

    PYTHONPATH=shared/src:packages/mosa-rl/src OMP_NUM_THREADS=1 nice -n 10 \
        python packages/mosa-rl/benchmarks/real_probe.py --problems 16 --samples 32
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from mosa_rl.demo import REAL, VALIDATION_PROBLEM_SEED, load_base, pose
from mosa_rl.evaluation import pass_at_k

from paperstack import tasks
from paperstack.contract import check_model
from paperstack.llm import cut_fallback_turn

#: name -> (Countdown parameters, prompt style, max new tokens, temperature)
VARIANTS: dict[str, tuple[dict[str, int], str, int, float]] = {
    "cd3-instruct": ({"n_numbers": 3}, "instruct", 64, 1.0),
    "cd2-instruct": ({"n_numbers": 2}, "instruct", 64, 1.0),
    "cd2-oneop": ({"n_numbers": 2}, "oneop", 24, 1.0),
    "cd2-oneop-example": ({"n_numbers": 2}, "oneop-example", 24, 1.0),
    "cd2-choices": ({"n_numbers": 2}, "oneop-choices", 24, 1.0),
    "cd2-choices-t0.7": ({"n_numbers": 2}, "oneop-choices", 24, 0.7),
    "cd2-oneop-t0.7": ({"n_numbers": 2}, "oneop", 24, 0.7),
    # Probe-only (not a demo prompt style yet): worked examples as earlier chat turns, the
    # shape that lifted SmolLM2 from 5% to 45% on one-operation arithmetic in
    # progress-advantage's task probe; a shrunk real arm needs a base pass@1 well above 0.014.
    "cd2-chat-t0.7": ({"n_numbers": 2}, "chat", 24, 0.7),
    "cd2-chat-t1": ({"n_numbers": 2}, "chat", 24, 1.0),
}

#: ``chat``: one worked example per operation as earlier turns (none is a validation problem
#: of seed 4321's first 16: checked in ``chat_messages``), then the problem in the same words.
CHAT_EXAMPLES = (((2, 6), 12, "2*6=12"), ((3, 9), 6, "9-3=6"), ((4, 5), 9, "4+5=9"),
                 ((4, 8), 2, "8/4=2"))  # fmt: skip


def chat_messages(numbers: list[int], target: int) -> list[dict[str, str]]:
    """The ``chat`` variant's conversation for one problem."""
    if any(sorted(numbers) == sorted(n) and target == t for n, t, _ in CHAT_EXAMPLES):
        raise SystemExit(f"real_probe.py: problem {numbers} -> {target} is a worked example")
    head = ("Combine the numbers with + - * / (each number used once) to get the target. "
            "Reply with only the expression and its value.\n")  # fmt: skip
    messages: list[dict[str, str]] = []
    for i, (n, t, answer) in enumerate(CHAT_EXAMPLES):
        user = f"Numbers {n[0]} {n[1]}, target {t}."
        messages += [{"role": "user", "content": (head if i == 0 else "") + user},
                     {"role": "assistant", "content": answer}]  # fmt: skip
    nums = " ".join(str(x) for x in numbers)
    messages.append({"role": "user", "content": f"Numbers {nums}, target {target}."})
    return messages


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--problems", type=int, default=16)
    p.add_argument("--samples", type=int, default=32)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--out", default=None, help="JSON file for the per-problem counts")
    a = p.parse_args()
    torch.set_num_threads(1)
    model, tok = load_base(str(check_model(REAL.model)))
    model.eval()
    results = {}
    for name in a.variants.split(","):
        params, style, max_new, temperature = VARIANTS[name]
        task = tasks.get("countdown", **params)
        problems = task.generate(a.problems, seed=VALIDATION_PROBLEM_SEED, split="train")
        examples = problems if style == "chat" else pose(problems, style)
        cpu0 = time.process_time()
        conversations = [chat_messages(list(e.meta["numbers"]), e.meta["target"])
                         if style == "chat" else [{"role": "user", "content": e.prompt}]
                         for e in examples]  # fmt: skip
        texts = [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False)
                 for c in conversations]  # fmt: skip
        encoded = tok(texts, add_special_tokens=False)["input_ids"]
        groups: dict[int, list[int]] = {}
        for i, ids in enumerate(encoded):
            groups.setdefault(len(ids), []).append(i)
        answers: list[list[str]] = [[] for _ in examples]
        torch.manual_seed(0)
        with torch.no_grad():
            for length, idxs in groups.items():
                for s in range(0, len(idxs), 8):
                    chunk = idxs[s : s + 8]
                    x = torch.tensor([encoded[i] for i in chunk])
                    out = model.generate(input_ids=x, attention_mask=torch.ones_like(x),
                                         do_sample=True, temperature=temperature,
                                         top_p=1.0, top_k=0,
                                         max_new_tokens=max_new, num_return_sequences=a.samples,
                                         pad_token_id=tok.pad_token_id,
                                         eos_token_id=tok.eos_token_id)  # fmt: skip
                    dec = tok.batch_decode(out[:, length:], skip_special_tokens=True)
                    for j, i in enumerate(chunk):
                        mine = dec[j * a.samples : (j + 1) * a.samples]
                        answers[i] = [cut_fallback_turn(t) for t in mine]
        correct = np.array([[task.verify(e, t) for t in answers[i]]
                            for i, e in enumerate(examples)])  # fmt: skip
        c = correct.sum(1)
        ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= a.samples]
        passk = {k: float(pass_at_k(a.samples, c, k).mean()) for k in ks}
        cpu = time.process_time() - cpu0
        results[name] = {"correct": c.tolist(), "pass@k": passk, "cpu_s": cpu,
                         "prompt": texts[0],
                         "example_completions": answers[0][:2]}  # fmt: skip
        print(f"{name}: pass@k {json.dumps({k: round(v, 3) for k, v in passk.items()})}, "
              f"solved {int((c > 0).sum())}/{len(c)}, correct per problem {c.tolist()}, "
              f"{cpu:.0f} CPU-s", flush=True)  # fmt: skip
        print(f"  prompt: {texts[0][-160:]!r}", flush=True)
        for t in answers[0][:2]:
            print(f"  sample: {t!r}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
