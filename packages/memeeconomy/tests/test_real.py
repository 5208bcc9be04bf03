"""``demo --real`` on a tiny budget against a real server on 127.0.0.1 (the core's
``openai_sampling_server``: ``transformers serve`` of a random tiny model that samples), reached
the way the reported run reaches the shared vLLM server: through ``served(...)`` with
``$PAPERSTACK_SERVED_BASE_URL``. A random model writes no decision, so this pins the plumbing:
every decision is asked over HTTP and recorded (a failure with its reason), the premises are
measured and the paper's claims stay gated on them, the cost card is written."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("httpx")

from memeeconomy.real import COMPACT_HINT, REAL_QUICK, CompactAgent, build_real_claims, expand

from paperstack.records import Row, load_results

CLAIMS = {
    "real_premise_decisions_parse",
    "real_premise_placebo_has_no_pressure_effect",
    "real_pressure_raises_harm",
    "real_acknowledgement_suppressed_under_pressure",
    "real_moderation_does_not_deter",
}


def test_compact_decision_becomes_a_bdi_record_and_free_text_stays_a_failure():
    from memeeconomy.bdi import BDIRecord, parse_bdi

    reply = ('{"selected_meme": "ev001-D", "target_community": "r/TechTalk", "priority": '
             '"survival", "risk_tolerance": "high", "risk_acknowledged": false}')  # fmt: skip
    record = parse_bdi(expand(reply), {"ev001-D"}, {"r/TechTalk"})
    assert isinstance(record, BDIRecord)
    assert record.intention.selected_meme == "ev001-D"
    assert not record.risk_acknowledged
    assert "compact reply" in record.intention.reasoning
    assert expand("I would post the best meme") == "I would post the best meme"
    bad = parse_bdi(expand('{"selected_meme": "ev001-D", "target_community": "r/TechTalk"}'))
    assert not isinstance(bad, BDIRecord)  # missing fields: a recorded failure, not a guess


def test_compact_request_names_this_rounds_options_as_enums():
    from memeeconomy.events import COMMUNITIES, shipped_events
    from memeeconomy.market import PRESSURES, _status, build_messages

    event = shipped_events().events[0]
    messages = build_messages(event, COMMUNITIES, _status("a", PRESSURES["low"], 1, 1, None, []))

    class Client:
        model = "m"

    body = CompactAgent(Client(), [c.name for c in COMMUNITIES], "a")._body(messages, 80, 0.7)
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["selected_meme"]["enum"] == [o.id for o in event.options]
    assert COMPACT_HINT in body["messages"][-1]["content"]
    assert "seed" not in body


def test_claims_are_gated_on_the_premises():
    items = {f"a{i}": 0.3 + 0.01 * i for i in range(12)}
    rows = [
        Row.proportion("smollm2", "parse_failures", 40, 100),  # premise fails
        Row.from_items("smollm2-placebo", "pressure_effect", {k: 0.0 for k in items}),
        Row.from_items("smollm2", "pressure_effect", items),
        Row.from_items("smollm2", "ack_suppression", items),
        Row.from_items("smollm2", "deterrence", items),
    ]
    claims = {c.id: c for c in build_real_claims(rows)}
    assert set(claims) == CLAIMS
    assert claims["real_premise_decisions_parse"].verdict == "not_held"
    assert claims["real_pressure_raises_harm"].verdict == "inconclusive"
    assert claims["real_pressure_raises_harm"].measured_verdict == "held"


@pytest.mark.serve
@pytest.mark.slow
def test_demo_real_quick_against_a_served_model(openai_sampling_server: Any, tmp_path, monkeypatch):
    from memeeconomy.cli import main

    monkeypatch.setenv("PAPERSTACK_SERVED_BASE_URL", openai_sampling_server.base_url)
    out = tmp_path / "real"
    assert (
        main(["demo", "--real", "--quick", "--seed", "0", "--no-progress", "--out", str(out)]) == 0
    )
    results = load_results(out / "results.json")
    assert {c.id for c in results.claims} == CLAIMS
    by = {(r.system, r.metric): r for r in results.rows}
    failures = by[("smollm2", "parse_failures")]
    asked = REAL_QUICK["agents"] * REAL_QUICK["rounds"] * 3
    assert failures.n == asked
    card = json.loads((out / "cost_card.json").read_text())
    assert card["calls"] == asked
    assert by[("smollm2", "prompt_tokens")].value > 0
    # A random model writes no decision: the parse premise fails and gates the paper's claims.
    claims = {c.id: c for c in results.claims}
    assert claims["real_premise_decisions_parse"].verdict == "not_held"
    gated = [c for c in results.claims if c.requires]
    assert len(gated) == 3
    for claim in gated:
        assert claim.verdict == "inconclusive"
        assert "real_premise_decisions_parse" in claim.unmet
    data = json.loads((out / "results.json").read_text())
    assert data["manifest"]["config"]["real"]["agents"] == REAL_QUICK["agents"]
