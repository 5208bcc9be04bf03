"""The real `demo --quick`: results.json validates and holds the identity claims (slow)."""

import pytest
from progress_advantage import __version__
from progress_advantage.cli import main

from paperstack.records import load_results


@pytest.mark.slow
def test_demo_quick_writes_checked_results(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "results.json")  # validates and recomputes every claim
    assert results.manifest.version == __version__
    assert {"exact_identity", "pa_matches_exact_advantage_random"} <= {c.id for c in results.claims}
    assert (tmp_path / "report.md").read_text().startswith("# progress-advantage")


@pytest.mark.slow
def test_demo_real_runs_on_a_tiny_budget(tmp_path, monkeypatch):
    """`demo --real` end to end on SmolLM2-135M-Instruct with every size cut to a few items:
    the LoRA policy trains, the objective gap to the KL-regularised optimum is a per-prompt
    row with its premise claim, the MC agreement rests on it, and the run is held to the
    `["demo --real"]` declaration."""
    from dataclasses import replace

    from progress_advantage import demo

    full = demo.DemoConfig.real()
    rl = replace(full.lm.rl, prompts_per_step=2, num_generations=2, max_completion_length=16,
                 train_prompts=8, min_steps=1, max_steps=1, window=1, lora_r=4)  # fmt: skip
    lm = replace(full.lm, rl=rl, n_test=2, n_val=2, n_prm=2, n_objective=2,
                 objective_samples=2, n_candidates=2, mc_trajectories=2, mc_rollouts=2,
                 max_new_tokens=16)  # fmt: skip
    mdp = replace(full.mdp, max_iterations=100, groups=10, val_groups=5)
    tiny = replace(full, lm=lm, mdp=mdp, lm_seeds=1)
    monkeypatch.setattr(demo.DemoConfig, "real", classmethod(lambda cls: tiny))
    argv = ["demo", "--real", "--out", str(tmp_path), "--no-progress", "--seeds", "1"]
    assert main(argv) == 0
    results = load_results(tmp_path / "results.json")
    assert results.manifest.config["real"] is True
    assert results.manifest.config["demo"]["lm"]["model"] == "smollm2-135m-instruct"
    rows = {(r.system, r.metric, r.split) for r in results.rows}
    assert ("RL policy", "objective_gap", "lm-b0.1-train") in rows
    assert ("KL-optimal policy (MC estimate)", "kl_regularised_objective", "lm-b0.1-train") in rows
    # the declared mixture estimate of V*, with the reference-only plug-in reported beside it
    assert results.manifest.config["demo"]["lm"]["optimum_estimator"] == "mixture"
    plugin = ("KL-optimal policy (reference samples only)", "kl_regularised_objective")
    assert (*plugin, "lm-b0.1-train") in rows
    claims = {c.id: c for c in results.claims}
    assert "premise_near_optimum_b01" in claims
    assert claims["mc_agreement_b01"].requires == ("premise_near_optimum_b01",)
    assert (
        "SmolLM2" in (tmp_path / "report.md").read_text()
        or "smollm2" in (tmp_path / "report.md").read_text()
    )


@pytest.mark.slow
def test_a_killed_demo_resumes_with_the_numbers_of_an_uninterrupted_one(tmp_path, monkeypatch):
    """The MC data and each LM seed are resumable parts. As from a clean checkout: after a
    run, the part of LM seed 1 is removed (the process was killed during it); a process given
    only seed 1 and the same --mc-seed loads the MC data and computes seed 1 in a process where
    seed 0 never ran, and the run that assembles both writes the rows of the uninterrupted run
    (no global random state leaks from one seed to the next)."""
    from dataclasses import replace

    from progress_advantage import demo

    from paperstack import records, resume

    monkeypatch.setattr(records, "_git_revision", lambda: "0123456789abcdef")
    monkeypatch.setattr(records, "_git_dirty", lambda: None)
    monkeypatch.setattr(resume, "code_identity", lambda folders: ({"code": "0123"}, ""))
    two = replace(demo.DemoConfig.quick(), lm_seeds=2)
    monkeypatch.setattr(demo.DemoConfig, "quick", classmethod(lambda cls: two))
    out, parts_dir = tmp_path / "run", tmp_path / "parts"
    common = ["demo", "--quick", "--mc-seed", "0", "--parts", str(parts_dir), "--no-progress"]
    assert main([*common, "--seeds", "0,1", "--out", str(out)]) == 0
    first = load_results(out / "results.json")
    parts = sorted(parts_dir.iterdir())
    assert [p.name.rsplit("-", 1)[0] for p in parts] == ["lm-seed-0-mc-0", "lm-seed-1-mc-0", "mc-0"]
    next(p for p in parts if p.name.startswith("lm-seed-1-")).unlink()
    assert main([*common, "--seeds", "1", "--out", str(tmp_path / "one")]) == 0
    alone = load_results(tmp_path / "one" / "results.json")
    assert [p["key"] for p in alone.manifest.resumed or []] == ["mc-0"]
    assert main([*common, "--seeds", "0,1", "--out", str(out)]) == 0
    again = load_results(out / "results.json")
    assert [p["key"] for p in again.manifest.resumed or []] == [
        "mc-0",
        "lm-seed-0-mc-0",
        "lm-seed-1-mc-0",
    ]
    assert [r.model_dump() for r in again.rows] == [r.model_dump() for r in first.rows]
