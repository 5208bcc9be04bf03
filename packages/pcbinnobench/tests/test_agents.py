"""The reference agents and the step language: what the heuristic reads, what it cannot."""

import random

from pcbinnobench.agents import DoNothingAgent, HeuristicAgent, parse_step
from pcbinnobench.catalog import describe_action
from pcbinnobench.harness import run_episode
from pcbinnobench.tinyagent import (
    action_to_command,
    command_to_action,
    mask_numbers,
    random_action,
    unmask_numbers,
)


def _same(a, b):
    assert a["tool"] == b["tool"]
    for key, value in a["args"].items():
        got = b["args"][key]
        if isinstance(value, float | int):
            assert abs(float(got) - float(value)) < 1e-9, (key, a, b)
        elif key == "points":
            assert [[float(x), float(y)] for x, y in got] == [
                [float(x), float(y)] for x, y in value
            ]
        else:
            assert got == value, (key, a, b)


def test_every_trajectory_sentence_parses_back_to_its_action():
    rng = random.Random(0)
    for _ in range(400):
        action = random_action(rng)
        parsed = parse_step(describe_action(action))
        assert parsed is not None, describe_action(action)
        _same(action, parsed)
    assert parse_step("Make the board better.") is None


def test_the_compact_command_language_round_trips_with_the_copy_pointer():
    rng = random.Random(1)
    for _ in range(300):
        action = random_action(rng)
        command = action_to_command(action)
        masked, numbers = mask_numbers(command)
        _same(action, command_to_action(unmask_numbers(masked, numbers)))


def test_heuristic_uses_the_trajectory_and_only_naive_rules_without_it(tasks):
    by_id = {t.id: t for t in tasks}
    swap = by_id["ldo_swap_c1_0603"]
    value = by_id["ldo_c2_2u2"]
    decap = by_id["ldo_decap_vout"]
    assert run_episode(decap, HeuristicAgent(), "guided").passed
    assert not run_episode(decap, HeuristicAgent(), "objective").passed
    assert run_episode(swap, HeuristicAgent(), "objective").passed  # C1 is the lowest C
    wrong = run_episode(value, HeuristicAgent(), "objective")  # it edits C1, not C2
    assert not wrong.passed
    assert any(c.name == "unchanged" and "C1" in c.detail for c in wrong.result.failures())


def test_do_nothing_makes_one_call():
    ep_agent = DoNothingAgent()
    assert ep_agent.generate([[{"role": "user", "content": "x"}]]) == [
        ['{"tool": "done", "args": {}}']
    ]
