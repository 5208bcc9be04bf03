"""The synthetic multilingual world: partial remappings at a controllable distance, word
order, and a true reward on concepts that the pairs follow."""

import pytest
from meta_pref import MetaPrefError, MultilingualWorld


def test_distance_controls_how_many_concepts_are_respelled(world):
    base = tuple("abcdefgh")
    for code in world.codes:
        lang = world.language(code)
        changed = sum(a != b for a, b in zip(lang.surface, base, strict=True))
        assert changed == round(lang.distance * world.concepts)
        assert sorted(lang.surface) == list(base)  # a permutation: letters stay shared
        assert lang.reversed == (lang.distance >= 0.5)
    far, near = world.language("far"), world.language("near")
    assert sum(a != b for a, b in zip(far.surface, base, strict=True)) > sum(
        a != b for a, b in zip(near.surface, base, strict=True)
    )


def test_true_reward_prefers_the_answer_alone(world):
    q = 3
    ans = world.answer[q]
    other = next(c for c in range(world.concepts) if c != ans)
    assert world.true_reward(q, [ans]) == 1.0
    assert world.true_reward(q, [ans]) > world.true_reward(q, [ans, other])  # shorter
    assert world.true_reward(q, [ans, other]) > world.true_reward(q, [other])  # has the answer
    assert world.true_reward(q, [other, other]) < world.true_reward(q, [other])  # repeats
    assert world.true_reward(q, []) == -1.0


def test_pairs_follow_the_true_reward_in_every_language(world):
    for code in ("s1", "s5", "far"):
        for p in world.pairs(code, 50, seed=2):
            assert p.lang == code
            assert world.reward_of_text(code, p.prompt, p.chosen) > world.reward_of_text(
                code, p.prompt, p.rejected
            )


def test_word_order_is_reversed_in_far_languages(world):
    lang = world.language("far")
    assert lang.reversed
    text = world.prompt_text("far", 1, 2)
    assert text == lang.surface[2] + lang.surface[1]  # distractor first
    assert world.response_text("far", [1, 2]) == lang.surface[2] + lang.surface[1]


def test_pairs_are_deterministic_per_seed(world):
    assert world.pairs("near", 10, seed=1) == world.pairs("near", 10, seed=1)
    assert world.pairs("near", 10, seed=1) != world.pairs("near", 10, seed=2)


def test_bad_world_is_one_error():
    with pytest.raises(MetaPrefError, match=r"distance 1\.5"):
        MultilingualWorld({"x": 1.5})
    with pytest.raises(MetaPrefError, match="concepts=40"):
        MultilingualWorld({"x": 0.2}, concepts=40)
