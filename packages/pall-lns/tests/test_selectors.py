import json
import time

import numpy as np
import pytest
from pall_lns.context import N_BASE_FEATURES, N_OP_BLOCKS, Context, Event
from pall_lns.errors import PallError
from pall_lns.selectors import (
    EpsilonGreedySelector,
    Exp3Selector,
    LearnedSelector,
    LLMSelector,
    UCBSelector,
    alns_reward,
    load_default,
)

from paperstack.llm import RuleAgent


def _ctx(n_ops=3, history=()):
    return Context(
        n_ops=n_ops,
        op_labels=tuple(f"op{i}" for i in range(n_ops)),
        n_vars=100,
        n_rows=50,
        density=0.1,
        int_frac=1.0,
        progress=0.3,
        iteration=4,
        stagnation=1,
        k_frac=0.2,
        gap=0.1,
        history=tuple(history),
        op_mean=(0.0,) * n_ops,
        op_count=(0,) * n_ops,
    )


def test_context_features_have_fixed_length_and_prompt_asks_for_op():
    ctx = _ctx(history=[Event(2, 0.5, True, "optimal", 0.3)])
    phi = ctx.features()
    assert phi.shape == (N_BASE_FEATURES + N_OP_BLOCKS * 3,)
    assert phi[N_BASE_FEATURES + 2 * 3 + 2] == 1.0  # last operator: 2
    assert phi[-1] > 0  # op 2's reward within the history window
    assert "OP=<id>" in ctx.prompt()
    assert "op 2: reward 0.5" in ctx.prompt()


def test_ucb_tries_every_arm_then_exploits():
    sel = UCBSelector(3, c=0.01, seed=0)
    ctx = _ctx()
    first = []
    for _ in range(3):
        op = sel.select(ctx)
        first.append(op)
        sel.update(ctx, op, 1.0 if op == 1 else 0.0)
    assert sorted(first) == [0, 1, 2]
    assert sel.select(ctx) == 1


def test_alns_reward_is_in_unit_interval():
    assert alns_reward(True, 1.0, 1.0) == 1.0
    assert alns_reward(False, 0.0, 1.0) == 0.0
    assert 0 < alns_reward(False, 0.5, 1.0) < alns_reward(True, 0.5, 1.0)


class _Picks2(RuleAgent):
    def respond(self, messages):
        return "I pick OP=2"


def test_llm_selector_parses_op_from_a_chat_model():
    sel = LLMSelector(_Picks2(), 3)
    assert sel.select(_ctx()) == 2
    assert sel.fallbacks == 0


def test_llm_selector_falls_back_on_garbage_out_of_range_and_timeout():
    for reply in ("no idea", "OP=7"):
        sel = LLMSelector(lambda prompt, r=reply: r, 3)
        assert 0 <= sel.select(_ctx()) < 3
        assert sel.fallbacks == 1

    def slow(prompt):
        time.sleep(1.0)
        return "OP=1"

    sel = LLMSelector(slow, 3, timeout=0.05)
    t = time.perf_counter()
    sel.select(_ctx())
    assert sel.fallbacks == 1
    assert time.perf_counter() - t < 0.5


def test_learned_selector_round_trips_and_rejects_bad_files(tmp_path):
    sel = load_default()
    assert sel.W.shape == (len(sel.ops), N_BASE_FEATURES + N_OP_BLOCKS * len(sel.ops))
    p = tmp_path / "sel.json"
    p.write_text(json.dumps(sel.to_json()))
    again = LearnedSelector.load(p)
    ctx = _ctx(n_ops=len(sel.ops))
    assert again.select(ctx) == sel.select(ctx)
    p.write_text(json.dumps({"format": "other"}))
    with pytest.raises(PallError, match="format"):
        LearnedSelector.load(p)
    with pytest.raises(PallError, match="no such selector"):
        LearnedSelector.load(tmp_path / "none.json")
    with pytest.raises(PallError, match="features"):
        sel.select(_ctx(n_ops=len(sel.ops) + 1)) if len(sel.W) == len(sel.ops) + 1 else (
            LearnedSelector(np.zeros((2, 5)), sel.ops[:2]).select(_ctx(n_ops=2))
        )


def test_epsilon_greedy_exploits_the_best_mean_and_explores_at_rate_eps():
    sel = EpsilonGreedySelector(3, eps=0.2, seed=0)
    ctx = _ctx()
    for op in (0, 1, 2):
        sel.update(ctx, op, 1.0 if op == 2 else 0.0)
    picks = [sel.select(ctx) for _ in range(2000)]
    share = picks.count(2) / len(picks)
    assert 0.8 + 0.2 / 3 - 0.04 < share < 0.8 + 0.2 / 3 + 0.04


def test_exp3_shifts_probability_to_the_rewarded_arm():
    sel = Exp3Selector(3, gamma=0.1, seed=0)
    ctx = _ctx()
    assert np.allclose(sel.probabilities(), 1 / 3)
    for _ in range(50):
        op = sel.select(ctx)
        sel.update(ctx, op, 1.0 if op == 1 else 0.0)
    p = sel.probabilities()
    assert p.argmax() == 1
    assert p.min() >= 0.1 / 3 - 1e-12  # gamma keeps every arm explored
    assert p.sum() == pytest.approx(1.0)


def test_context_text_serialises_history_and_phase_for_the_lm():
    ctx = _ctx(history=[Event(2, 0.5, True, "optimal", 0.3), Event(0, 0.0, False, "timelimit", 1)])
    text = ctx.text()
    assert "phase 0.30" in text
    assert "stall 1" in text
    assert "last 2+0.500 0t0.000" in text
    assert len(text) < 400  # the tiny LM's context is 512 characters
