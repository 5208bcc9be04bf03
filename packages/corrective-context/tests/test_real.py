import json

import numpy as np
import pytest
import torch
from corrective_context import cli as cli_module
from corrective_context.cli import main
from corrective_context.real import (
    PROBE,
    SELECTOR,
    DigitModel,
    RealConfig,
    problems,
    prompt,
    run_queries,
    sample_queries,
    value,
)

from paperstack import tiny


@pytest.fixture(scope="module")
def lm():
    torch.set_num_threads(1)
    tokenizer = tiny.build_tokenizer(model_max_length=256)
    return tiny.build_model(tiny.QUICK_PRESET, tokenizer, seed=0), tokenizer


def test_the_task_has_110_single_digit_problems_and_plain_prompts():
    probs = problems()
    assert len(probs) == len(set(probs)) == 110
    assert {r for _, r in probs} == set(range(10))
    assert prompt(["1 + 2 = 3"], "4 - 1") == "1 + 2 = 3\n4 - 1 = "


def test_value_is_the_expected_digit():
    logits = np.full((2, 10), -1e9)
    logits[0, 7] = 0.0
    logits[1, [2, 4]] = 0.0
    np.testing.assert_allclose(value(logits), [[7.0], [3.0]])


def test_queries_never_hold_their_own_problem_and_are_seeded():
    qs = sample_queries(0, 2, 20, 8)
    assert all(q.problem not in q.pool and len(set(q.pool)) == 8 for q in qs)
    assert qs == sample_queries(0, 2, 20, 8)
    assert qs != sample_queries(0, 1, 20, 8)  # validation and test streams differ


def test_left_padding_does_not_change_the_answer(lm):
    reader = DigitModel(*lm, batch=4)
    short, long = prompt([], "1 + 2"), prompt(["3 + 4 = 7", "5 - 5 = 0"], "1 + 2")
    alone = reader.read([short])[0]
    padded = reader.read([short, long])[0]
    np.testing.assert_allclose(alone[0], padded[0], atol=1e-4)


def test_every_system_gets_one_row_per_query(lm):
    config = RealConfig(queries=2, pool=4, budget=2, batch=8)
    out = run_queries(DigitModel(*lm, batch=8), sample_queries(0, 1, 2, 4), config, 0)
    for name in ("no-context", "random-1", "random-4", "all-items", SELECTOR, PROBE):
        assert len(out[name]) == 2
        assert all(np.isfinite(out[name]))
    assert all(0 <= s <= 1 for s in out["single_over_share"])
    assert all(0 <= k <= 2 for k in out["selector_size"])


def test_demo_real_writes_the_premise_and_selector_claims(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(cli_module, "REAL_MODEL", str(model_dir))  # SmolLM2 in the real run
    out = tmp_path / "real"
    args = ["demo", "--real", "--quick", "--seeds", "0", "--queries", "2", "--no-progress",
            "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    claims = {c["id"] for c in json.loads((out / "results.json").read_text())["claims"]}
    assert {"real_headroom", "real_premise_demonstrations_overcorrect",
            "real_selector_beats_error_probe"} <= claims  # fmt: skip


def test_toy_flags_are_refused_with_real(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["demo", "--real", "--steps", "5", "--out", str(tmp_path / "x")])
    assert info.value.code == 2
    assert "--steps" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
