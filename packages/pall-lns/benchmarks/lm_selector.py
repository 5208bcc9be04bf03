"""Issue #53, item 5: the LM selector's training set grown, retrained, judged at 100k.

Three stages, each resumable (its outputs under ``OUT`` are kept and reused):

1. ``grow``: new hindsight-oracle states (:func:`pall_lns.oracle.collect`, the shipped records'
   settings: 6 s search clock, 20 states, the shipped ensemble) on new small training
   instances, set cover, auction and facility, generator seeds ``GROW_SEEDS`` (the shipped
   training instances are seeds 10-12, held-out 20-21), one JSONL per instance under
   ``OUT/oracle/``. Only informative states (some operator improved) train the LM.
2. ``train``: the LM selector (:data:`pall_lns.lm.RECIPE`, the tiny Llama, unchanged) fine-tuned
   on the shipped 177 states plus the grown ones (cached by data), and the shipped-data LM for
   comparison; both scored offline on the shipped held-out states (share of the oracle's reward
   their choice earns, paired over states).
3. ``judge``: at 100k variables (set cover and auction ``xl``, generator seeds ``JUDGE_SEEDS``),
   LNS with the grown LM in-process (``lns-lm``) against uniform random (``lns-random``) and the
   UCB bandit (``lns-bandit``) over the same operators, ``T`` seconds each on one thread (sub-MIPs
   freed on the search thread), run seed 0; primal integral and final primal gap to the best
   value any of the three found, paired over instances (the core's statistics: Student t below
   ten items). One JSON per run under ``OUT/runs/``.

The claims and their premise are declared in ``preregistration.toml`` (table
``["lm-selector"]``); the run compares its claims with that declaration and records the
deviations (none expected) in ``OUT/lm_selector.json`` beside the rows and claims, and writes
``OUT/lm_selector.md``.

Run: ``python benchmarks/lm_selector.py OUT [--time-limit 60]``; ``--tiny`` is the test's
version (smoke instances, a few oracle states, QUICK_RECIPE, 1 s runs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

GROW_FAMILIES = ("setcover", "auction", "facility")
GROW_SEEDS = (13, 14, 15)
JUDGE_FAMILIES = ("setcover", "auction")
JUDGE_SEEDS = (1000, 1001)
METHODS = ("lns-lm", "lns-random", "lns-bandit")
COMMAND = "lm-selector"


def _write(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def grow(out: Path, tiny: bool, log: Any) -> list[dict[str, Any]]:
    """New oracle states, one JSONL per instance (a finished instance is not redone)."""
    from pall_lns.generators import generate
    from pall_lns.oracle import collect, load_records
    from pall_lns.selectors import load_default

    ops = load_default().ops
    odir, work = out / "oracle", out / "work"
    odir.mkdir(parents=True, exist_ok=True)
    size, T, states = ("smoke", 1.0, 2) if tiny else ("small", 6.0, 20)
    records: list[dict[str, Any]] = []
    for j, (fam, seed) in enumerate((f, s) for s in GROW_SEEDS for f in GROW_FAMILIES):
        if tiny and j >= 2:
            break
        dest = odir / f"{fam}-{size}-s{seed}.jsonl"
        if not dest.is_file():
            g = generate(fam, size, seed, work)
            t = time.perf_counter()
            tmp = dest.with_suffix(".part")
            tmp.unlink(missing_ok=True)
            n = collect([g.path], ops, T, tmp, states=states, seed=300 + j)
            os.replace(tmp, dest)
            log(f"{dest.name}: {n} oracle states in {time.perf_counter() - t:.0f} s")
        # shipped form: the context carries the features and prompt (rebuilt on load)
        records += [
            {k: r[k] for k in ("instance", "state", "context", "rewards", "label")}
            for r in load_records(dest)
        ]
    return records


def train(
    out: Path, grown: list[dict[str, Any]], tiny: bool, log: Any
) -> tuple[Any, Any, dict[str, Any]]:
    """The LM trained on shipped + grown states, and on the shipped states alone."""
    import numpy as np
    from pall_lns.demo import shipped_records
    from pall_lns.lm import QUICK_RECIPE, RECIPE, LMSelector, train_lm
    from pall_lns.selectors import load_default

    k = len(load_default().ops)
    recipe = QUICK_RECIPE if tiny else RECIPE
    shipped = shipped_records("oracle-train.jsonl")
    both = shipped + grown

    def informative(rs: list[dict[str, Any]]) -> int:
        return sum(bool(np.any(np.asarray(r["rewards"]) > 0)) for r in rs)

    t = time.perf_counter()
    grown_lm = LMSelector.load(train_lm(both, k, recipe, log=log), k)
    train_s = time.perf_counter() - t
    shipped_lm = LMSelector.load(train_lm(shipped, k, recipe, log=log), k)
    info = {
        "states": {"shipped": len(shipped), "grown": len(grown), "total": len(both)},
        "informative": {"shipped": informative(shipped), "grown": informative(grown),
                        "total": informative(both)},
        "recipe": recipe.__dict__, "train_s": train_s,
    }  # fmt: skip
    log(f"LM trained on {info['informative']['total']} informative states of {len(both)}")
    return grown_lm, shipped_lm, info


def offline_rows(grown_lm: Any, shipped_lm: Any) -> list[Any]:
    from pall_lns.demo import shipped_records
    from pall_lns.experiment import oracle_reward_shares

    from paperstack.records import Row

    rows = []
    for split, name in (("heldout-same", "oracle-heldout-same.jsonl"),
                        ("heldout-unseen", "oracle-heldout-unseen.jsonl")):  # fmt: skip
        held = shipped_records(name)
        for system, choose in (("random", None), ("lm-grown", grown_lm.select),
                               ("lm-shipped", shipped_lm.select)):  # fmt: skip
            shares = oracle_reward_shares(held, choose)
            rows.append(Row.from_items(system, "oracle_reward_share", shares, split=split))
    return rows


def judge(out: Path, lm: Any, T: float, tiny: bool, log: Any) -> tuple[list[Any], list[Any]]:
    """The online runs (one JSON each, a finished run is not redone) and their records."""
    from pall_lns.demo import instance
    from pall_lns.experiment import RunRecord, Selectors, run_method
    from pall_lns.selectors import load_default

    linear = load_default()
    sel = Selectors(linear, lm, int(linear.meta.get("best_single", 0)))
    rdir = out / "runs"
    rdir.mkdir(parents=True, exist_ok=True)
    size = "smoke" if tiny else "xl"
    paths, records = [], []
    for seed in JUDGE_SEEDS:
        for fam in JUDGE_FAMILIES:
            path = instance(fam, size, seed, out / "instances")
            paths.append(path)
            for m in METHODS:
                dest = rdir / f"{path.stem}.{m}.json"
                if not dest.is_file():
                    load = os.getloadavg()[0]
                    r = run_method(m, path, T, 0, sel, background_free=False)
                    _write(dest, {**r.__dict__, "time_limit": T,
                                  "load": [load, os.getloadavg()[0]]})  # fmt: skip
                    log(f"{path.name} {m}: final {r.final} ({r.wall_s:.1f} s)")
                d = json.loads(dest.read_text())
                records.append(RunRecord(d["instance"], d["family"], d["method"], d["final"],
                                         [tuple(x) for x in d["timeline"]], d["wall_s"],
                                         {**d["info"], "load": d["load"]}))  # fmt: skip
    return paths, records


#: (id, statement, lhs, op, rhs, metric, split, premise): the declared claims.
CLAIMS = (
    ("premise_operator_choice_matters",
     "premise: on held-out oracle states a uniformly random operator earns less than 90% of "
     "the best operator's reward, so choosing the operator matters",
     "random", "lt", 0.9, "oracle_reward_share", "heldout-same", None),
    ("grown_lm_beats_random_heldout",
     "Held-out states of the training families: the LM trained on the grown set earns a larger "
     "share of the oracle's reward than random choice, paired over states",
     "lm-grown", "gt", "random", "oracle_reward_share", "heldout-same",
     "premise_operator_choice_matters"),
    ("grown_lm_beats_shipped_lm_heldout",
     "Held-out states: the LM trained on the grown set earns a larger share of the oracle's "
     "reward than the LM trained on the shipped 177 states",
     "lm-grown", "gt", "lm-shipped", "oracle_reward_share", "heldout-same",
     "premise_operator_choice_matters"),
    ("xl_lm_beats_random_integral",
     "100k variables: LNS with the grown LM has a lower mean primal integral than random "
     "operator choice, paired over instances",
     "lns-lm", "lt", "lns-random", "primal_integral", "all", "premise_operator_choice_matters"),
    ("xl_lm_beats_bandit_integral",
     "100k variables: LNS with the grown LM has a lower mean primal integral than the UCB "
     "bandit over the same operators, paired over instances",
     "lns-lm", "lt", "lns-bandit", "primal_integral", "all", "premise_operator_choice_matters"),
    ("xl_lm_beats_random_final_gap",
     "100k variables: the grown LM's final primal gap is lower than random choice's",
     "lns-lm", "lt", "lns-random", "primal_gap", "all", "premise_operator_choice_matters"),
    ("xl_lm_beats_bandit_final_gap",
     "100k variables: the grown LM's final primal gap is lower than the UCB bandit's",
     "lns-lm", "lt", "lns-bandit", "primal_gap", "all", "premise_operator_choice_matters"),
)  # fmt: skip


def claims_of(rows: list[Any]) -> list[Any]:
    from paperstack.records import Claim

    by_id: dict[str, Any] = {}
    for cid, text, lhs, op, rhs, metric, split, premise in CLAIMS:
        right = rhs if isinstance(rhs, float) else (rhs, metric, split)
        req = [by_id[premise]] if premise else []
        by_id[cid] = Claim.compare(cid, text, rows, (lhs, metric, split), op, right, requires=req)
    return list(by_id.values())


def declaration() -> tuple[Any, str]:
    from importlib import resources

    from paperstack.preregistration import parse

    raw = resources.files("pall_lns").joinpath("preregistration.toml").read_bytes()
    decls = parse(raw.decode(), "pall_lns/preregistration.toml")
    return decls.get(COMMAND), hashlib.sha256(raw).hexdigest()


def _revision() -> str | None:
    try:
        here = Path(__file__).parent
        cp = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                            text=True, timeout=10)  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--", ".."],
                               capture_output=True, text=True, timeout=10).stdout  # fmt: skip
        return (
            cp.stdout.strip() + ("+dirty" if dirty.strip() else "") if cp.returncode == 0 else None
        )
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--time-limit", type=float, default=60.0)
    p.add_argument("--tiny", action="store_true", help="the test's version (smoke sizes)")
    a = p.parse_args(argv)
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    T = 1.0 if a.tiny else a.time_limit
    logf = (out / "log.txt").open("a")

    def log(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f} {msg}"
        print(line, file=logf, flush=True)

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    grown = grow(out, a.tiny, log)
    grown_lm, shipped_lm, info = train(out, grown, a.tiny, log)
    rows = offline_rows(grown_lm, shipped_lm)
    from pall_lns.experiment import summarise

    paths, records = judge(out, grown_lm, T, a.tiny, log)
    online, extra = summarise(records, paths, T)
    rows += [r for r in online if r.split == "all" or r.split in JUDGE_FAMILIES]
    claims = claims_of(rows)
    decl, sha = declaration()
    from paperstack.preregistration import deviations

    dev = deviations(claims, decl) if decl else ["no [lm-selector] table declared"]
    result = {
        "command": f"python benchmarks/lm_selector.py {out} --time-limit {T:g}"
        + (" --tiny" if a.tiny else ""),
        "revision": _revision(), "started": started,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "preregistration_sha256": sha, "deviations": dev, "training": info,
        "time_limit_s": T, "references": extra["references"],
        "loads": {f"{r.instance}/{r.method}": r.info.get("load") for r in records},
        "rows": [r.model_dump(mode="json") for r in rows],
        "claims": [c.model_dump(mode="json") for c in claims],
    }  # fmt: skip
    _write(out / "lm_selector.json", result)
    (out / "lm_selector.md").write_text(_markdown(result, rows, claims, records))
    logf.close()
    return result


def _markdown(result: dict[str, Any], rows: list[Any], claims: list[Any], records: Any) -> str:
    tr = result["training"]
    lines = [
        f"# LM selector: grown training set, judged at 100k (`{result['command']}`)",
        "",
        f"Revision {result['revision']}, {result['started']} to {result['finished']}. "
        f"Training states: {tr['states']['shipped']} shipped + {tr['states']['grown']} grown = "
        f"{tr['states']['total']}; informative {tr['informative']['shipped']} + "
        f"{tr['informative']['grown']} = {tr['informative']['total']}. Deviations from the "
        f"declaration: {result['deviations'] or 'none'}.",
        "",
        "| system | metric | split | mean [95% interval] | n |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ci = "" if r.ci95 is None else f" [{r.ci95[0]:.3f}, {r.ci95[1]:.3f}]"
        lines.append(f"| {r.system} | {r.metric} | {r.split} | {r.value:.3f}{ci} | {r.n} |")
    lines += ["", "| claim | verdict | measured |", "|---|---|---|"]
    for c in claims:
        lines.append(f"| `{c.id}` | {c.verdict} | {c.describe()} |")
    lines += [
        "",
        "| instance | method | final (internal, min) | wall | load |",
        "|---|---|---|---|---|",
    ]
    for r in records:
        load = r.info.get("load") or [0, 0]
        lines.append(f"| {r.instance} | {r.method} | {r.final} | {r.wall_s:.1f} s | "
                     f"{load[0]:.1f}-{load[1]:.1f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
