"""The open-unlearning evaluation suite: each metric against its definition."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from ra2_unlearn import metrics

from paperstack.tasks import Example


def test_rouge_l_matches_the_longest_common_subsequence():
    recall, f1 = metrics.rouge_l("the cat sat on a mat", "the cat is on the mat")
    # LCS = "the cat on mat" (4 of 6 words each way).
    assert recall == pytest.approx(4 / 6)
    assert f1 == pytest.approx(4 / 6)
    assert metrics.rouge_l("Zinc.", "zinc") == (1.0, 1.0)
    assert metrics.rouge_l("", "zinc") == (0.0, 0.0)


def test_mia_auc_is_the_mann_whitney_probability():
    assert metrics.mia_auc(np.array([3.0, 4.0]), np.array([1.0, 2.0])) == 1.0
    assert metrics.mia_auc(np.array([1.0, 2.0]), np.array([3.0, 4.0])) == 0.0
    assert metrics.mia_auc(np.array([1.0, 3.0]), np.array([2.0, 2.0])) == 0.5
    assert metrics.mia_auc(np.array([2.0]), np.array([2.0])) == 0.5  # ties count half


def test_forget_quality_is_one_for_the_same_distribution_and_small_for_a_shift():
    rng = np.random.default_rng(0)
    a = rng.uniform(size=200)
    assert metrics.forget_quality(a, a) == pytest.approx(1.0)
    assert metrics.forget_quality(a, a + 0.5) < 1e-6


def test_token_scores_and_min_k_pp_follow_their_definitions(micro):
    model, tok = micro
    ex = [Example("x", "Who?", "Bakiru", {})]
    ts = metrics.token_scores(model, tok, ex)
    enc = tok(tok.apply_chat_template([{"role": "user", "content": "Who?"}],
                                      add_generation_prompt=True, tokenize=False),
              add_special_tokens=False)["input_ids"]  # fmt: skip
    answer = tok("Bakiru" + tok.eos_token, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([enc + answer])).logits[0]
    logp = torch.log_softmax(logits[len(enc) - 1 : -1], -1)
    expected = logp[torch.arange(len(answer)), torch.tensor(answer)].numpy()
    assert np.allclose(ts.logp[0], expected, atol=1e-5)
    p = logp.exp()
    mu = (p * logp).sum(-1).numpy()
    sd = np.sqrt((p * logp.pow(2)).sum(-1).numpy() - mu**2)
    scores = metrics.mia_scores(model, tok, ex, k=0.5)
    z = np.sort((expected - mu) / sd)[: math.ceil(0.5 * len(answer))]
    assert scores["min_k_pp"][0] == pytest.approx(z.mean(), abs=1e-4)
    assert scores["loss"][0] == pytest.approx(expected.mean(), abs=1e-5)
    low = np.sort(expected)[: math.ceil(0.5 * len(answer))]
    assert scores["min_k"][0] == pytest.approx(low.mean(), abs=1e-5)


def test_truth_ratio_is_below_one_where_the_model_knows_the_answer(knowing):
    model, tok, splits = knowing
    ratios = metrics.truth_ratios(model, tok, splits.forget)
    assert ratios.shape == (len(splits.forget),)
    assert np.median(ratios) < 0.5  # the model prefers the true value to the nine others
    assert np.all(ratios > 0)


def test_knowmem_and_verbmem_score_what_the_model_says(knowing):
    model, tok, splits = knowing
    assert metrics.knowmem(model, tok, splits.forget).mean() >= 0.9
    assert metrics.verbmem(model, tok, splits.forget).mean() >= 0.9
    raw = [Example("corpus", "", "alpha beta gamma delta epsilon", {"raw": True})]
    score = metrics.verbmem(model, tok, raw, prefix_tokens=8, max_new_tokens=16)
    assert score.shape == (1,)
    assert 0.0 <= score[0] <= 1.0


def test_members_score_above_never_seen_facts(knowing):
    model, tok, splits = knowing
    members = metrics.mia_scores(model, tok, splits.forget)
    others = metrics.mia_scores(model, tok, splits.holdout)
    for attack in metrics.MIA_ATTACKS:
        assert metrics.mia_auc(members[attack], others[attack]) > 0.7, attack


def test_evaluate_command_scores_a_users_model_and_files(knowing, tmp_path, capsys):
    import json

    from ra2_unlearn.cli import main

    model, tok, _ = knowing
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    forget, holdout = tmp_path / "forget.jsonl", tmp_path / "holdout.jsonl"
    forget.write_text(
        '{"question": "Which toxin?", "choices": ["ricin", "salt", "sugar"], "answer": 0}\n'
        '{"question": "Which agent?", "choices": ["water", "anthrax"], "answer": "B"}\n'
    )
    holdout.write_text(
        '{"question": "Which fruit?", "choices": ["apple", "rock"], "answer": 0}\n'
        '{"question": "Which stone?", "choices": ["pear", "flint"], "answer": 1}\n'
    )
    out = str(tmp_path / "eval")
    argv = ["evaluate", "--model", str(folder), "--forget", str(forget), "--holdout",
            str(holdout), "--retain-model", str(folder), "--out", out]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((tmp_path / "eval" / "evaluation.json").read_text())
    found = report["metrics"]
    assert {"truth_ratio", "mc_accuracy", "knowmem", "mia_auc_min_k_pp"} <= set(found)
    # Against itself as the retain model: the same truth ratios and membership AUCs.
    assert found["forget_quality"] == pytest.approx(1.0)
    assert found["mia_auc_min_k"] == report["retain_model_metrics"]["mia_auc_min_k"]
    if found["mia_auc_min_k"] > 0:
        assert found["privleak"] == pytest.approx(0.0)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"text": "Bakiru keeps a zinc anvil on Mars and a cat at home."}\n')
    argv = ["evaluate", "--model", str(folder), "--forget", str(corpus), "--format", "corpus",
            "--out", str(tmp_path / "eval2")]  # fmt: skip
    assert main(argv) == 0
    assert "verbmem" in json.loads((tmp_path / "eval2" / "evaluation.json").read_text())["metrics"]
    assert "ra2: verbmem" in capsys.readouterr().out
