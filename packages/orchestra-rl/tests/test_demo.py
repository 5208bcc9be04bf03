"""The demo's claims, rows and traces, and its own bad flags (the generic command-line checks
are the conformance suite's: tests/test_conformance.py)."""

import json

import pytest
from orchestra_rl.cli import main

from paperstack.records import Claim, Row, load_results

PREMISE = "premise_random_broadcast_no_gain"
CLAIMS = {
    PREMISE,
    "learned_beats_random_broadcast",
    "learned_beats_spend_matched_broadcast",
    "learned_beats_best_fixed_topology",
    "gap_grows_with_n",
    "entropy_helps",
}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    args = ["demo", "--quick", "--sizes", "2,4", "--iterations", "2", "--no-progress"]
    assert main([*args, "--out", str(out)]) == 0
    return out


def test_demo_quick_writes_the_claims_judged_from_rows(quick_run):
    results = load_results(quick_run / "results.json")  # validates and recomputes every claim
    assert {c.id for c in results.claims} == CLAIMS
    assert results.claims[0].id == "premise_random_broadcast_no_gain"  # the premise first
    row = results.row("orchestra_rl", "accuracy", "N=4")
    assert sorted(row.seeds) == ["0", "1", "2"]  # per-seed values: claims are paired
    for system in ("single_shot", "self_consistency", "random_broadcast", "fixed_star"):
        calls = results.row(system, "calls", "N=4")
        assert calls.value <= 12  # the budget, 3 N
    assert results.row("single_shot", "calls", "N=2").value == 2
    config = results.manifest.config
    assert set(config["topology_frequencies"]) == {"N=2", "N=4"}
    assert config["best_fixed_topology"]["N=4"].startswith("fixed_")
    # The spend-matched control's speak probability comes from the training instances.
    from orchestra_rl.cli import MATCH_P

    assert set(config["random_broadcast_matched_p"]) == {
        f"seed={s},N={n}" for s in (0, 1, 2) for n in (2, 4)
    }
    assert set(config["random_broadcast_matched_p"].values()) <= set(MATCH_P)
    assert results.row("orchestra_rl_no_entropy", "accuracy", "N=4").n == 3
    assert (quick_run / "report.md").read_text().startswith("# orchestra-rl")
    assert "mode / topology" in (quick_run / "report.md").read_text()


def _replace(rows: list[Row], system: str, split: str, values: list[float]) -> list[Row]:
    kept = [
        r for r in rows if not (r.system == system and r.metric == "accuracy" and r.split == split)
    ]
    return [*kept, Row.from_seeds(system, "accuracy", dict(enumerate(values)), split=split)]


def test_method_claims_rest_on_the_premise_and_are_inconclusive_without_it(quick_run):
    results = load_results(quick_run / "results.json")
    claims = {c.id: c for c in results.claims}
    for cid in CLAIMS - {PREMISE}:
        assert claims[cid].requires == (PREMISE,)
        if claims[PREMISE].verdict != "held":
            assert claims[cid].verdict == "inconclusive"
            assert claims[cid].unmet == (PREMISE,)
    # Rows where the premise is clearly absent (random broadcast far above single-shot) and
    # the learned policy clearly loses: alone the method claim is not held, gated it is
    # inconclusive: the toy cannot show the effect, so the method has not failed.
    large = claims[PREMISE].lhs.split
    assert large is not None
    rows = list(results.rows)
    rows = _replace(rows, "single_shot", large, [0.30, 0.32, 0.31])
    rows = _replace(rows, "random_broadcast", large, [0.90, 0.93, 0.91])
    rows = _replace(rows, "orchestra_rl", large, [0.10, 0.12, 0.11])
    rows = _replace(rows, "best_fixed_topology", large, [0.80, 0.83, 0.81])

    def rejudge(claim: Claim, requires: list[Claim]) -> Claim:
        return Claim.compare(
            claim.id, claim.statement, rows, claim.lhs, claim.op, claim.rhs, claim.margin,
            requires=requires,
        )  # fmt: skip

    premise = rejudge(claims[PREMISE], [])
    assert premise.verdict == "not_held"
    method = claims["learned_beats_best_fixed_topology"]
    assert rejudge(method, []).verdict == "not_held"
    gated = rejudge(method, [premise])
    assert gated.verdict == "inconclusive"
    assert gated.unmet == (PREMISE,)


def test_demo_writes_traces_of_who_said_what_to_whom(quick_run):
    traces = json.loads((quick_run / "traces.json").read_text())
    assert traces
    assert traces[0]["n_agents"] == 4
    for ep in traces:
        assert ep["calls"] == len(ep["calls_trace"]) <= ep["budget"]
        for call in ep["calls_trace"]:
            assert {"round", "agent", "from", "text", "answer"} <= set(call)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sizes", "1,4"], "every N must be >= 2"),
        (["--sizes", "4"], "at least two sizes"),
        (["--sizes", "0,4"], "--sizes"),
        (["--iterations", "0"], "--iterations"),
        (["--seeds", "x"], "--seeds"),
    ],
)
def test_bad_flags_are_one_line_errors(tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--quick", "--out", str(out), *flags])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    # our own checks are one line; argparse's type errors add its usage lines above the error
    assert err[-1].startswith("orchestra")
    assert message in err[-1]
    assert not out.exists()


@pytest.mark.slow
def test_bench_writes_ratios(tmp_path):
    assert main(["bench", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "bench.json")
    row = results.row("orchestration_per_round_over_one_call", "time_ratio")
    assert row.n == 6
    assert row.ci95 is not None
    assert results.row("model-call+orchestrator", "matches_model-call").value == 1.0
