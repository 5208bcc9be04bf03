import pytest
from proofrank.judges import RuleJudge
from proofrank.leaderboard import evaluate, proxy_correctness_correlation
from proofrank.problems import shipped_problems
from proofrank.provers import scripted_provers

TEST = shipped_problems().split("test")
SMALL = TEST.subset(TEST.ids[:10])


@pytest.fixture(scope="module")
def runs():
    provers = scripted_provers(SMALL)
    return {s: evaluate(p, SMALL, RuleJudge(), samples=3, name=s) for s, p in provers.items()}


def test_known_orders_show_on_the_proxies(runs):
    def mean(style, metric):
        v = runs[style].values(metric)
        return sum(v.values()) / len(v)

    assert mean("verbose", "verbosity") > mean("elegant", "verbosity") + 0.5
    assert mean("verbose", "unnecessary_share") > mean("elegant", "unnecessary_share")
    assert mean("advanced", "tier") > mean("elegant", "tier")
    assert mean("technique-following", "label_diversity") > 0
    assert mean("single-technique", "label_diversity") == 0
    assert mean("technique-following", "adaptivity") > mean("single-technique", "adaptivity")
    assert mean("gapped", "correct") == 0
    assert runs["gapped"].values("verbosity") == {}


def test_rows_are_per_problem_and_correctness_is_k_of_n(runs):
    rows = {r.metric: r for r in runs["elegant"].rows(split="test")}
    assert rows["correct"].k == 10
    assert rows["correct"].n == 10
    assert sorted(rows["verbosity"].items) == sorted(SMALL.ids)
    assert rows["judge_failures"].k == 0


def test_correlation_is_undefined_when_provers_are_equally_correct(runs):
    c = proxy_correctness_correlation(runs, "verbosity", resamples=50)
    assert c["rho"] is None
    assert c["ci95"] is None
