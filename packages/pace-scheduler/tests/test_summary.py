"""Claims of one sweep: the goodput claims rest on the paper's premises (``requires``)."""

from pace_scheduler.summary import claims_for, rows_for

from paperstack.records import Claim

LOADS = (0.5, 1.0, 1.5)
SEEDS = range(5)


def _records(goodput):
    """One sweep's records; ``goodput(policy, load, seed)`` gives each run's goodput."""
    return [
        {
            "sweep": "toy",
            "policy": pol,
            "load": load,
            "seed": seed,
            "goodput": goodput(pol, load, seed),
            "attainment": 1.0,
            "p99_tpot_ms": 10.0,
            "mean_width": 1.0,
        }
        for pol in ("irp-off", "irp-eager", "pace", "cap-2")
        for load in LOADS
        for seed in SEEDS
    ]


def _claims(records):
    rows = rows_for(records, "toy", ["cap-2"])
    claims = claims_for(rows, "toy", loads=LOADS, medium=1.0, chosen_cap="cap-2", label="toy")
    return rows, {c.id: c for c in claims}


GATED = (
    "toy_pace_beats_off_goodput",
    "toy_pace_beats_eager_goodput",
    "toy_pace_beats_every_fixed_cap",
    "toy_pace_beats_hindsight_cap",
)
PREMISES = ("toy_premise_parallel_branches_pay", "toy_premise_branch_externality")


def test_a_claim_on_an_absent_premise_is_inconclusive_not_refuted():
    # Admitting every branch never costs goodput (IRP-Eager above IRP-Off at every load, also
    # the highest): the externality premise is absent, and Pace, which ties IRP-Eager, would on
    # its own interval fail `>= 1.2x IRP-Eager`. The toy cannot show the effect: inconclusive.
    def goodput(pol, load, seed):
        noise = 0.01 * ((seed * 7 + len(pol)) % 5)
        return {"irp-off": 2.0, "irp-eager": 3.0, "pace": 3.0, "cap-2": 2.5}[pol] + noise

    rows, by_id = _claims(_records(goodput))
    assert list(by_id)[:2] == list(PREMISES)  # the premises come before what rests on them
    assert by_id["toy_premise_parallel_branches_pay"].verdict == "held"
    assert by_id["toy_premise_branch_externality"].verdict == "not_held"
    for cid in GATED:
        claim = by_id[cid]
        assert claim.requires == PREMISES
        assert claim.verdict == "inconclusive", cid
        assert claim.unmet == ("toy_premise_branch_externality",)
        assert "premise `toy_premise_branch_externality` not held" in claim.premise_text()
    eager = by_id["toy_pace_beats_eager_goodput"]
    ungated = Claim.compare(eager.id, eager.statement, rows, eager.lhs, eager.op, eager.rhs)
    assert ungated.verdict == "not_held"  # what the gate keeps from being reported as a failure
    assert eager.diff == ungated.diff  # the interval is still recorded
    assert by_id["toy_pace_slo_ge_95"].requires == ()  # Pace's own SLO is judged as is


def test_with_both_premises_present_the_claims_are_judged_on_their_intervals():
    # Branches pay at slack and cost goodput under load; Pace well above every baseline.
    def goodput(pol, load, seed):
        noise = 0.01 * ((seed * 7 + len(pol)) % 5)
        eager = 3.0 if load < 1.0 else (2.5 if load == 1.0 else 1.0)
        base = {"irp-off": 2.0, "irp-eager": eager, "pace": 5.0, "cap-2": 2.5}[pol]
        return base + noise

    _, by_id = _claims(_records(goodput))
    for cid in PREMISES + GATED:
        assert by_id[cid].verdict == "held", cid
        assert by_id[cid].unmet == ()
