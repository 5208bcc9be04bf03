import itertools
import random
import statistics

from memeeconomy.metrics import agent_stats, deterrence_placebo, deterrence_raw, population_rows


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


def test_placebo_is_the_permutation_mean_of_the_raw_difference():
    # With rounds exchangeable (no deterrence), the raw difference's expectation given the
    # agent's counts is its mean over every order of the rounds: positive (the streak bias, a
    # removal needs a harmful round), and what the shuffled placebo estimates.
    seq = [(1, "removed"), (1, "clean"), (1, "removed")] + [(0, "clean")] * 4
    orders = [deterrence_raw(list(o)) for o in itertools.permutations(seq)]
    exact = statistics.mean(v for v in orders if v is not None)
    assert exact > 0.05
    assert abs(deterrence_placebo(seq, "a", shuffles=10000) - exact) < 0.02  # 4 standard errors


def test_placebo_removes_the_streak_bias_of_independent_rounds():
    # Independent rounds over 64 rounds, like one agent in one market: the placebo (the bias)
    # is clearly above zero, and the corrected difference is centred on zero.
    rng = random.Random(7)
    raw, placebo = [], []
    for i in range(1000):
        p = rng.uniform(0.2, 0.5)
        seq = []
        for _ in range(64):
            harm = int(rng.random() < p)
            seq.append((harm, "removed" if harm and rng.random() < 0.3 else "clean"))
        observed = deterrence_raw(seq)
        shuffled = deterrence_placebo(seq, f"t{i}", shuffles=10)
        if observed is not None and shuffled is not None:
            raw.append(observed)
            placebo.append(shuffled)
    corrected = [a - b for a, b in zip(raw, placebo, strict=True)]
    se = statistics.stdev(corrected) / len(corrected) ** 0.5
    assert statistics.mean(placebo) > 0.006  # about 0.012, standard error 0.002
    assert abs(statistics.mean(corrected)) < 3 * se


def test_deterrence_raw_reads_consecutive_rounds():
    seq = [(1, "removed"), (0, "clean"), (1, "clean"), (None, "none"), (1, "removed"), (1, "clean")]
    # after a removal: 0 (round 1), 1 (round 5); after a clean round: 1 (round 2); round 3
    # failed and round 4 followed a failure
    assert deterrence_raw(seq) == 1.0 - 0.5
    assert deterrence_raw([(1, "clean"), (0, "clean")]) is None
