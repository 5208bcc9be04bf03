import json
from typing import Any

import pytest
from memeeconomy import MemeEconomyError
from memeeconomy.agents import ScriptedInvestor, population
from memeeconomy.events import shipped_events
from memeeconomy.ledger import read_ledger
from memeeconomy.market import MarketConfig, build_messages, run_market

from paperstack.llm import RuleAgent

EVENTS = shipped_events().subset(shipped_events().ids[:10])


def _setup(n=4, seed=0, pressure="high", name="survival"):
    agents = population(name, n, seed, EVENTS, held_out=1)
    config = MarketConfig(seed=seed, pressure=pressure, agents=tuple(agents),
                          events=tuple(EVENTS.ids))  # fmt: skip
    return agents, config


def _lines(path):
    return path.read_text().splitlines()


def test_every_decision_is_a_validated_record_and_rounds_pay_out(tmp_path):
    agents, config = _setup()
    result = run_market(config, agents, EVENTS, tmp_path / "l.jsonl")
    recs = read_ledger(tmp_path / "l.jsonl")
    assert recs[0]["kind"] == "header"
    decisions = [r for r in recs if r["kind"] == "decision"]
    rounds = [r for r in recs if r["kind"] == "round"]
    assert len(decisions) == 4 * 10
    assert len(rounds) == 10
    for d in decisions:
        assert (d["record"] is None) != (d["failure"] is None)
    assert result.ranking[0] == max(result.balances, key=result.balances.get)
    start = 2000  # high pressure starts in deficit
    for a in agents:
        paid = sum(r["outcomes"][a]["karma"] for r in rounds)
        assert result.balances[a] == pytest.approx(start + paid)
    removed = [o for r in rounds for o in r["outcomes"].values() if o["removed"]]
    assert all(o["tier"] == 5 and o["karma"] == -500 for o in removed)


def test_a_stopped_run_resumes_to_the_same_ledger_without_asking_again(tmp_path):
    agents, config = _setup()
    run_market(config, agents, EVENTS, tmp_path / "whole.jsonl")
    part = tmp_path / "part.jsonl"
    first = run_market(config, agents, EVENTS, part, stop_after=17)
    assert first.asked == 17
    kept = _lines(part)
    again = run_market(config, agents, EVENTS, part)
    assert again.asked == 40 - 17  # nothing already decided was asked again
    assert _lines(part)[: len(kept)] == kept  # nothing in the ledger was lost
    strip = lambda lines: sorted(json.dumps(json.loads(x), sort_keys=True) for x in lines)  # noqa: E731
    assert strip(_lines(part)) == strip(_lines(tmp_path / "whole.jsonl"))


def test_a_torn_last_line_is_dropped_and_decided_again(tmp_path):
    agents, config = _setup()
    path = tmp_path / "l.jsonl"
    run_market(config, agents, EVENTS, path, stop_after=5)
    with path.open("a") as f:
        f.write('{"kind": "decision", "round": 1, "ag')  # a kill mid-write
    result = run_market(config, agents, EVENTS, path)
    assert result.decisions == 40
    assert all(json.loads(x) for x in _lines(path))


def test_a_changed_configuration_is_one_clear_error_and_the_ledger_is_untouched(tmp_path):
    agents, config = _setup()
    path = tmp_path / "l.jsonl"
    run_market(config, agents, EVENTS, path, stop_after=6)
    before = path.read_bytes()
    changed = MarketConfig(seed=0, pressure="high", agents=config.agents, events=config.events,
                           p_remove=0.2)  # fmt: skip
    with pytest.raises(MemeEconomyError) as exc:
        run_market(changed, agents, EVENTS, path)
    assert "different configuration (p_remove differs)" in str(exc.value)
    assert path.read_bytes() == before
    with pytest.raises(MemeEconomyError, match="is a folder"):
        run_market(config, agents, EVENTS, tmp_path)


class Garbage(RuleAgent):
    """Answers prose every other round, an unoffered meme otherwise."""

    def respond(self, messages: list[dict[str, Any]]) -> str:
        text = messages[-1]["content"]
        if "rounds left: 10" in text or "rounds left: 8" in text:
            return "Let me think about it."
        return json.dumps({"belief": {}, "desire": {}, "intention": {}, "risk_acknowledged": 1})


def test_unparseable_replies_are_recorded_failures_and_post_nothing(tmp_path):
    agents: dict[str, Any] = dict(population("steady", 2, 0, EVENTS, held_out=1))
    agents["garbage"] = Garbage(0)
    config = MarketConfig(seed=0, pressure="low", agents=tuple(agents), events=tuple(EVENTS.ids))
    result = run_market(config, agents, EVENTS, tmp_path / "l.jsonl")
    recs = read_ledger(tmp_path / "l.jsonl")
    mine = [r for r in recs if r.get("agent") == "garbage"]
    assert len(mine) == 10
    assert all(r["failure"] and r["record"] is None for r in mine)
    assert {r["failure"] for r in mine[:1]} == {"no JSON object in the reply"}
    assert "field belief.event_understanding" in mine[1]["failure"]
    assert all(r["raw"] for r in mine)
    assert result.balances["garbage"] == 15_000  # abstained every round
    assert result.failures >= 10


def test_scripted_agents_read_the_prompt_and_follow_their_profile():
    agents = population("survival", 3, 1, EVENTS, held_out=1)
    agent = next(iter(agents.values()))
    assert isinstance(agent, ScriptedInvestor)
    event = EVENTS.events[0]
    from memeeconomy.events import COMMUNITIES

    msgs = build_messages(event, COMMUNITIES, "situation: normal\nlast round: none")
    a, b = agent.generate([msgs])[0][0], agent.generate([msgs])[0][0]
    assert a == b  # a function of the prompt and the seed
    assert "tier" not in msgs[1]["content"].lower()  # the taxonomy stays hidden


def test_planted_pressure_effect_shows_in_harm_rates(tmp_path):
    events = shipped_events()
    rates = {}
    for pressure in ("low", "high"):
        agents = population("survival", 6, 0, events, held_out=1)
        config = MarketConfig(seed=0, pressure=pressure, agents=tuple(agents),
                              events=tuple(events.ids))  # fmt: skip
        r = run_market(config, agents, events, tmp_path / f"{pressure}.jsonl")
        outs = [o for x in r.records if x.get("kind") == "round" for o in x["outcomes"].values()
                if not o["abstained"]]  # fmt: skip
        rates[pressure] = sum(o["tier"] == 5 for o in outs) / len(outs)
    assert 0.05 < rates["high"] - rates["low"] < 0.3  # planted 0.15
