"""A real server in the loop: market agents served by ``transformers serve`` on 127.0.0.1.

The served model is the core's micro tiny Llama with random weights: its replies are noise, so
every decision is a parse failure, and this pins the plumbing: each decision is one request
over HTTP (counted with the server's token counts), every failure is in the ledger with the raw
reply, the agents post nothing, and a resumed run asks the server nothing again. A market
prompt is about 2,900 tokens: it fits the served micro model's stated context
(``paperstack.testing.SERVED_CONTEXT``) and is refused in one line by a client told of a
512-token one (the toy preset's own), as it would be by a 512-token model's server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")
pytest.importorskip("torch")

from memeeconomy.events import shipped_events
from memeeconomy.ledger import read_ledger
from memeeconomy.market import MarketConfig, run_market

from paperstack.llm import OpenAIChat

pytestmark = pytest.mark.serve

EVENTS = shipped_events().subset(shipped_events().ids[:2])


def test_served_agents_play_rounds_and_every_parse_failure_is_recorded(
    openai_server: Any, tmp_path
):
    agents = {f"served-{i}": OpenAIChat(openai_server.base_url, openai_server.model, timeout=120)
              for i in range(2)}  # fmt: skip
    config = MarketConfig(seed=0, pressure="high", agents=tuple(agents), events=tuple(EVENTS.ids))
    path = tmp_path / "served.jsonl"
    result = run_market(config, agents, EVENTS, path, max_new_tokens=12)
    calls = sum(a.ledger.calls for a in agents.values())
    assert calls == result.decisions == 4
    assert all(a.ledger.completion_tokens > 0 for a in agents.values())
    decisions = [r for r in read_ledger(path) if r["kind"] == "decision"]
    assert len(decisions) == 4
    assert result.failures == 4  # a random model writes no BDI record
    assert all(
        d["failure"] and d["record"] is None and isinstance(d["raw"], str) for d in decisions
    )
    rounds = [r for r in read_ledger(path) if r["kind"] == "round"]
    assert all(o["abstained"] for r in rounds for o in r["outcomes"].values())
    again = run_market(config, agents, EVENTS, path, max_new_tokens=12)
    assert again.asked == 0
    assert sum(a.ledger.calls for a in agents.values()) == calls


def test_simulate_command_against_the_server_writes_a_cost_card(openai_server: Any, tmp_path):
    from memeeconomy.cli import main

    ledger = tmp_path / "run" / "l.jsonl"
    argv = ["simulate", "--ledger", str(ledger), "--base-url", openai_server.base_url,
            "--model", openai_server.model, "--rounds", "2", "--max-new-tokens", "8"]  # fmt: skip
    assert main(argv) == 0
    card = json.loads((tmp_path / "run" / "cost_card.json").read_text())
    assert card["calls"] == 2
    failures = [r for r in read_ledger(ledger) if r.get("failure")]
    assert len(failures) == 2


def test_simulate_honours_agents_with_a_served_model(openai_server: Any, tmp_path):
    """--agents N with --base-url: N served agents (the models in turn), not one per --model."""
    from memeeconomy.cli import main

    ledger = tmp_path / "run" / "l.jsonl"
    argv = ["simulate", "--ledger", str(ledger), "--base-url", openai_server.base_url,
            "--model", openai_server.model, "--agents", "3", "--rounds", "1",
            "--max-new-tokens", "4"]  # fmt: skip
    assert main(argv) == 0
    card = json.loads((tmp_path / "run" / "cost_card.json").read_text())
    assert card["calls"] == 3  # one decision per agent on the one event
    decided = {r["agent"] for r in read_ledger(ledger) if "agent" in r}
    assert decided == {f"{openai_server.model}#{i}" for i in range(3)}


def test_a_prompt_over_the_served_context_is_one_line(openai_server: Any, tmp_path: Path) -> None:
    """transformers serve answers a prompt longer than a model's positions (HTTP 200, with
    noise or nothing); the client refuses it in one line naming both numbers, and the market
    stops there instead of recording the reply as the agent's decision."""
    from paperstack.llm import ContextOverflowError

    agents = {"short": OpenAIChat(openai_server.base_url, openai_server.model, timeout=120,
                                  context_length=512)}  # fmt: skip
    config = MarketConfig(seed=0, pressure="high", agents=tuple(agents), events=tuple(EVENTS.ids))
    with pytest.raises(ContextOverflowError) as info:
        run_market(config, agents, EVENTS, tmp_path / "short.jsonl", max_new_tokens=4)
    assert "\n" not in str(info.value)
    assert "context of 512 tokens (context_length)" in str(info.value)
