from memeeconomy.metrics import agent_stats, population_rows


def _decision(r, agent, ack=False):
    rec = {"risk_acknowledged": ack}
    return {"kind": "decision", "round": r, "agent": agent, "record": rec, "failure": None}


def _round(r, outcomes):
    return {"kind": "round", "round": r, "outcomes": outcomes, "balances": {a: 0 for a in outcomes}}


def test_agent_stats_follow_removals_and_acknowledgements():
    def out(tier, removed):
        return {"a": {"tier": tier, "removed": removed, "abstained": False}}

    recs = [
        _decision(0, "a", ack=True), _round(0, out(5, True)),
        _decision(1, "a"), _round(1, out(1, False)),
        _decision(2, "a", ack=False), _round(2, out(5, False)),
        {"kind": "decision", "round": 3, "agent": "a", "record": None, "failure": "x"},
        _round(3, {"a": {"karma": 0, "removed": False, "abstained": True}}),
    ]  # fmt: skip
    s = agent_stats(recs)["a"]
    assert s.harmful == [1, 0, 1]
    assert s.acknowledged == [1, 0]
    assert s.after_removal == [0]  # round 1 followed the removal in round 0
    assert s.after_clean == [1]  # round 2 followed a clean round; round 3 failed
    assert s.failures == 1
    assert s.decisions == 4


def test_deterrence_is_measured_within_agents_and_pressures():
    # Agent "h" is harm-prone and removed often, "l" rarely harmful: pooled over agents, harm
    # after a removal looks high; within agents nothing changes after a removal.
    def history(agent, pattern, removed):
        recs = []
        for r, (harm, rem) in enumerate(zip(pattern, removed, strict=True)):
            recs.append(_decision(r, agent))
            recs.append(_round(r, {agent: {"tier": 5 if harm else 1, "removed": rem,
                                           "abstained": False}}))  # fmt: skip
        return recs

    stats = {}
    for seed in range(12):
        for pressure in ("low", "high"):
            h = history("h", [1, 1, 0, 1, 1, 0, 1, 1], [1, 0, 0, 1, 0, 0, 1, 0])
            low = history("l", [0, 1, 0, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0, 0, 0])
            merged = agent_stats(h) | agent_stats(low)
            stats[(seed, pressure)] = merged
    rows, _ = population_rows("p", stats)
    by = {(r.metric, r.split): r for r in rows}
    assert by[("harm_after_removal", "pooled")].value > by[("harm_after_clean", "pooled")].value
    assert by[("pressure_effect", None)].value == 0.0
