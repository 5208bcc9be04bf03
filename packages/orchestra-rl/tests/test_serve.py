"""A real server in the loop: a small swarm of agents served by ``transformers serve``.

The served model is the core's micro tiny Llama with random weights, so its answers are noise;
this pins the runtime against a real OpenAI-compatible server: every call is one HTTP request
issued concurrently from the swarm's pool, the hard budget holds per instance, the trace's
token counts are the server's (never estimated), and the cost card written by ``orchestra
swarm`` equals the sums of the per-instance traces.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("httpx")

from orchestra_rl.agents import AgentSpec
from orchestra_rl.baselines import FixedTopology
from orchestra_rl.swarm import Swarm, SwarmConfig
from orchestra_rl.tasks import builtin_evaluator, instance_pool

from paperstack.llm import OpenAIChat

pytestmark = pytest.mark.serve


def test_served_swarm_keeps_its_budget_and_counts_the_servers_tokens(openai_server: Any) -> None:
    client = OpenAIChat(openai_server.base_url, openai_server.model, timeout=120, concurrency=4)
    seats = [AgentSpec(client, name=f"s{i}", temperature=0.7, max_new_tokens=8) for i in range(3)]
    swarm = Swarm(seats, builtin_evaluator(("addition",)),
                  SwarmConfig(budget=5, max_rounds=3, concurrency=4))  # fmt: skip
    instances = instance_pool("addition", 2, "test", 0)
    episodes = swarm.run(instances, FixedTopology("ring"), seed=1)
    # Round 0: 3 answers; round 1: the ring delivers to all 3 but only 2 calls are left.
    assert [ep.calls for ep in episodes] == [5, 5]
    assert [ep.denied for ep in episodes] == [1, 1]
    assert all(ep.errors == 0 and ep.timeouts == 0 for ep in episodes)
    calls = [c for ep in episodes for c in ep.trace]
    assert len(calls) == 10
    assert not any(c.estimated for c in calls)  # usage came from the server
    assert client.ledger.calls == 10
    assert client.ledger.prompt_tokens == sum(c.prompt_tokens for c in calls)
    assert client.ledger.completion_tokens == sum(c.completion_tokens for c in calls)
    # Updates carry the neighbour's reply: longer prompts than round 0's answers.
    first = [c.prompt_tokens for c in calls if c.kind == "answer"]
    later = [c.prompt_tokens for c in calls if c.kind == "update"]
    assert later
    assert min(later) > min(first)


def test_swarm_command_writes_a_cost_card_equal_to_the_traces(openai_server: Any, tmp_path) -> None:
    from orchestra_rl.cli import main

    out = tmp_path / "swarm"
    argv = ["swarm", "--base-url", openai_server.base_url, "--model", openai_server.model,
            "--agents", "2", "--budget", "4", "--rounds", "3", "--policy", "complete",
            "--task", "facts-mc", "--instances", "2", "--max-new-tokens", "8",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    card = json.loads((out / "cost_card.json").read_text())
    assert len(episodes) == 2
    assert all(e["calls"] <= 4 for e in episodes)
    assert summary["calls"] == sum(e["calls"] for e in episodes) == card["calls"]
    assert summary["estimated_calls"] == 0
    assert (
        card["prompt_tokens"]
        == summary["prompt_tokens"]
        == sum(c["prompt_tokens"] for e in episodes for c in e["calls_trace"])
    )
    assert card["completion_tokens"] == summary["completion_tokens"]
    assert card["by_model"][openai_server.model]["calls"] == card["calls"]


def test_swarm_command_refuses_a_budget_below_n_and_a_dead_server(tmp_path, capsys) -> None:
    from orchestra_rl.cli import main

    base = ["swarm", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--instances", "1",
            "--timeout", "2", "--out", str(tmp_path / "o")]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main([*base, "--agents", "4", "--budget", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "budget 3 is below the number of agents 4" in err[0]
    # A server that never answers: every call is a recorded failure, the run still finishes.
    assert main([*base, "--agents", "2", "--budget", "2"]) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["errors"] == summary["calls"] == 2


def test_swarm_prepares_out_before_any_call(tmp_path, capsys) -> None:
    """--out goes through the core's preparation: a dangling link was a FileExistsError
    traceback from mkdir; now it is one line, before the server is contacted."""
    from orchestra_rl.cli import main

    dangling = tmp_path / "gone"
    dangling.symlink_to(tmp_path / "deleted")
    argv = ["swarm", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--instances", "1",
            "--agents", "2", "--budget", "2", "--timeout", "2", "--out", str(dangling)]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "dangling symbolic link" in err[0]
