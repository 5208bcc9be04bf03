"""``accelerate launch --num_processes 2`` (gloo, CPU): the profile is pooled across ranks."""

import json
from pathlib import Path

import pytest

from paperstack.testing import accelerate_launch

WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    accelerate_launch(WORKER, out)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_two_ranks_ran_two_steps(ranks):
    assert [r["world"] for r in ranks] == [2, 2]
    assert len(ranks[0]["calls"]) == len(ranks[1]["calls"]) >= 2
    assert len(ranks[0]["kl"]) == 2


def test_profile_is_the_all_reduced_sum_of_both_ranks(ranks):
    for a, b in zip(ranks[0]["calls"], ranks[1]["calls"], strict=True):
        both = [x + y for x, y in zip(a["local"], b["local"], strict=True)]
        assert a["global"] == pytest.approx(both, rel=1e-6)
        assert b["global"] == pytest.approx(both, rel=1e-6)
        # every token's sorted profile sums to 1, so the sums count the tokens of each rank
        assert a["tokens"] == pytest.approx(sum(a["local"]) + sum(b["local"]), rel=1e-6)
        pooled = [g / a["tokens"] for g in both]
        assert a["pooled"] == pytest.approx(pooled, rel=1e-6)
        assert b["pooled"] == pytest.approx(pooled, rel=1e-6)


def test_pooling_changes_the_profile_each_rank_would_see_alone(ranks):
    differs = False
    for a in ranks[0]["calls"]:
        alone = [x / sum(a["local"]) for x in a["local"]]
        differs |= alone != pytest.approx(a["pooled"], abs=1e-6)
    assert differs


def test_ranks_log_the_same_kl_and_end_with_the_same_weights(ranks):
    assert ranks[0]["kl"] == pytest.approx(ranks[1]["kl"], rel=1e-6)
    assert ranks[0]["weights"] == pytest.approx(ranks[1]["weights"], rel=1e-6)
