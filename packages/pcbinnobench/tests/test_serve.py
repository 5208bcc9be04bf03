"""A real server in the loop: a model served by ``transformers serve`` plays the agent.

The served model is the core's micro tiny Llama with random weights, so its replies hold no
action: this pins the harness against a real OpenAI-compatible server. Every model call is one
HTTP request, the episode stops after three unparseable replies (never a crash), the sandbox
is judged by the hidden validators (a failed episode, never a pass), the token counts are the
server's (not estimated) and the cost card's harness counts equal the client's ledger.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("httpx")

from pcbinnobench.harness import Budget, cost_card, run_episode
from pcbinnobench.tasks import load_tasks

from paperstack.llm import OpenAIChat

pytestmark = pytest.mark.serve


@pytest.fixture(scope="module")
def task():
    return load_tasks(None, None)[0]


def test_a_served_agent_runs_an_episode_and_is_counted(openai_server: Any, task) -> None:
    agent = OpenAIChat(openai_server.base_url, openai_server.model, timeout=120)
    ep = run_episode(task, agent, "guided", Budget(max_calls=5, max_new_tokens=8),
                     keep_transcript=True)  # fmt: skip
    assert ep.stop == "no parseable action three times"
    assert ep.calls == 3 == agent.ledger.calls
    assert not ep.estimated_tokens  # usage came from the server
    assert ep.prompt_tokens == agent.ledger.prompt_tokens > 0
    assert ep.completion_tokens == agent.ledger.completion_tokens
    assert not ep.passed  # nothing was edited: the task's validators fail it
    assert ep.tool_calls == {}
    # Each reply is sent back with the harness's error: the conversation grows per call.
    assert [m["role"] for m in ep.transcript[:4]] == ["system", "user", "assistant", "user"]
    card = cost_card([ep], agent.ledger)
    row = card["agents"][f"{ep.agent}/guided"]
    assert row["calls"] == card["backend"]["calls"] == 3
    assert row["prompt_tokens"] == card["backend"]["prompt_tokens"]


def test_evaluate_command_writes_episodes_breakdown_and_cost_card(
    openai_server: Any, task, tmp_path
) -> None:
    from pcbinnobench.cli import main

    out = tmp_path / "eval"
    argv = ["evaluate", "--base-url", openai_server.base_url, "--model", openai_server.model,
            "--task", task.id, "--max-calls", "2", "--max-new-tokens", "8",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    episodes = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert [e["level"] for e in episodes] == ["objective", "guided"]
    assert all(e["calls"] == 2 and e["stop"] == "budget: model calls" for e in episodes)
    assert all(not e["passed"] for e in episodes)
    assert all(e["transcript"][0]["role"] == "system" for e in episodes)
    card = json.loads((out / "cost_card.json").read_text())
    assert card["backend"]["calls"] == 4
    harness_calls = sum(r["calls"] for r in card["agents"].values())
    assert harness_calls == 4
    assert "| objective | 0/1 |" in (out / "breakdown.md").read_text()


def test_evaluate_against_no_server_is_one_line(task, tmp_path, capsys) -> None:
    from pcbinnobench.cli import main

    argv = ["evaluate", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--task", task.id,
            "--timeout", "2", "--out", str(tmp_path / "o")]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "127.0.0.1:9" in err[0]
