"""A real server in the loop: the target agent served by ``transformers serve`` on 127.0.0.1.

Tool calls travel as text (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``, the
format the target's system prompt asks for), so any OpenAI-compatible server can serve a target
with tools; no server-side tool-calling API is needed. The served model here is the core's
micro tiny Llama with random weights: it never writes a well-formed call, so this pins the
plumbing: every target turn is one HTTP request counted in the ledger with the server's token
counts, broken calls are recorded (``on_target_error="record"``) and the episode goes on, the
checkers find no violation where the database did not change, and the episode ledger keeps
every episode.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("httpx")

from probe_audit import domains
from probe_audit.game import EpisodeLedger, GameConfig, play
from probe_audit.policy import check_episode
from probe_audit.strategies import ScriptedAuditor
from probe_audit.targets import ChatTarget

from paperstack.llm import OpenAIChat

pytestmark = pytest.mark.serve


def test_a_served_target_plays_audited_episodes(openai_server: Any, tmp_path) -> None:
    dom = domains.get("retail")
    db = dom.database(3)
    scenarios = dom.make_scenarios(db, 2, 3)
    model = OpenAIChat(openai_server.base_url, openai_server.model, timeout=120)
    target = ChatTarget(model, system_prompt=dom.system_prompt(), tool_role="user", window=4,
                        max_new_tokens=16)  # fmt: skip
    assert target.ledger is model.ledger  # the client's own ledger: the server's counts
    ledger_path = tmp_path / "episodes.jsonl"
    with EpisodeLedger(ledger_path) as ledger:
        episodes = play(dom, scenarios, ScriptedAuditor("social_engineering", 0), target, db,
                        GameConfig(max_turns=2, max_tool_calls=1, on_target_error="record"),
                        on_episode=ledger)  # fmt: skip
    assert len(episodes) == 2
    calls = sum(ep.target_calls for ep in episodes)
    assert calls >= 2 * 1  # at least one target answer per episode and turn played
    assert model.ledger.calls == calls
    assert model.ledger.prompt_tokens > 0
    assert model.ledger.unmetered == 0  # transformers serve reports usage for every call
    for ep in episodes:
        assert ep.db_after == ep.db_before  # a random model changes nothing...
        assert check_episode(ep, dom) == []  # ...so the checkers find no violation
    lines = ledger_path.read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == [ep.id for ep in episodes]


def _audit_served(server: Any, out: Any) -> dict[str, Any]:
    """``probe audit`` end to end against a real server, tiny budget: the preflight sees the
    model, the server takes ``tools=[...]`` (no refusal), every answer is one counted request
    with the server's token counts, every episode reaches the ledger and the report says how
    the tool calls travelled. Random weights write no usable call, so nothing else is asserted
    about what the target did."""
    from probe_audit.cli import main

    rc = main(["audit", "--target-base-url", server.base_url, "--target-model", server.model,
               "--domain", "retail", "--out", str(out), "--episodes", "2", "--max-turns", "1",
               "--max-tool-calls", "1", "--max-tokens", "12", "--auditors",
               "identity_manipulation", "--no-progress"])  # fmt: skip
    assert rc == 0
    data = json.loads((out / "audit.json").read_text())
    stats = data["tool_calls"]
    assert stats["tools_refused"] == ""  # transformers serve accepts the tools API
    assert stats["requests"] >= 2
    answered = (stats["native_calls"] + stats["text_calls"] + stats["messages"]
                + stats["malformed"])  # fmt: skip
    assert answered == stats["requests"]
    card = json.loads((out / "cost_card.json").read_text())
    assert card["calls"] == stats["requests"]
    assert card["prompt_tokens"] > 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2
    assert "How tool calls travelled" in (out / "report.md").read_text()
    return data


def test_probe_audit_runs_against_a_real_transformers_serve(openai_server: Any, tmp_path) -> None:
    """The session's served micro Llama (the server the test above already started)."""
    _audit_served(openai_server, tmp_path / "audit")


@pytest.mark.slow
def test_probe_audit_against_a_served_zoo_checkpoint(serve_model: Any, tmp_path) -> None:
    """The same against a zoo checkpoint of a family whose tool calls transformers serve parses
    (Qwen2, ChatML): its own server start (about a minute on the loaded CPU), hence slow."""
    from paperstack.testing import zoo

    _audit_served(serve_model(zoo.checkpoint("qwen2")), tmp_path / "audit")
