"""The bench's interleaved timing and output check on a random micro base (a diverging OPCT
fails the check); the whole ``bench --quick`` is in test_commands (slow)."""

import pytest

from paperstack.bench import compare_speed
from paperstack.testing import assert_bench_check_held


@pytest.fixture
def systems():
    """The bench's two systems on a random micro base, one step on a few pairs (what is tested
    is the bench's statistics and check, not the sycophantic base the demo tests build)."""
    from opct import harness
    from opct.bench import timed_systems
    from opct.pairs import mixed_pairs
    from opct.world import AlignmentWorld

    from paperstack import tiny

    tok = tiny.build_tokenizer()
    base = tiny.build_model("micro", tok, seed=0)
    pairs = mixed_pairs(AlignmentWorld(), 8, seed=0)
    settings = harness.TrainSettings(steps=1, batch_size=4, max_completion_length=4)
    targets = harness.bct_targets(base, tok, pairs, max_new_tokens=4)
    return timed_systems(base, tok, pairs, settings, targets)


def _compare(systems):
    from opct.bench import work_difference

    return compare_speed(systems, baseline="sft", repeats=2, check=work_difference)


def test_same_steps_give_a_median_ratio_and_a_held_check(systems):
    assert_bench_check_held(_compare(systems), "opct", repeats=2)


def test_a_diverging_opct_fails_the_output_check(systems, monkeypatch):
    import torch
    from opct import harness

    train = harness.train_opct

    def diverging(net, *a, **k):  # a wrong method: its weights end NaN
        result = train(net, *a, **k)
        with torch.no_grad():
            next(net.parameters()).fill_(float("nan"))
        return result

    monkeypatch.setattr(harness, "train_opct", diverging)
    cmp = _compare(systems)
    assert cmp.diff["opct"] == float("inf")
    assert cmp.correctness_claim("opct", cmp.rows()).verdict == "not_held"
