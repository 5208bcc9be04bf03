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
    assert mean("gapped", "certified") == 0
    assert mean("gapped", "unverified") > 0.5  # a gapped proof is not refuted, only unverified
    assert mean("elegant", "certified") == 1
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


def test_correlation_follows_the_provers_means():
    from proofrank.leaderboard import ProverRun
    from proofrank.scoring import ProofScore

    def run(name, correct_share, verbosity):
        ids = [f"p{i}" for i in range(10)]
        scores = {
            pid: ProofScore(pid, i < correct_share * 10, verbosity=verbosity + i / 100)
            for i, pid in enumerate(ids)
        }
        return ProverRun(name, ids, scores, {}, {}, [], 10)

    runs = {"a": run("a", 0.9, 1.0), "b": run("b", 0.6, 2.0), "c": run("c", 0.3, 3.0)}
    c = proxy_correctness_correlation(runs, "verbosity", resamples=200)
    assert c["rho"] == pytest.approx(-1.0)
    assert c["ci95"] is not None
    assert c["ci95"][0] <= -0.4


def test_pairwise_names_the_better_prover_by_the_interval(runs):
    from proofrank.leaderboard import pairwise

    pairs = {(c["a"], c["b"]): c for c in pairwise(runs, "verbosity")}
    c = pairs[("elegant", "verbose")]
    assert c["n"] == 10
    assert c["d"] < 0
    assert c["ci95"][1] < 0
    assert c["better"] == "elegant"  # lower verbosity is better
    same = pairs[("elegant", "single-technique")]
    assert same["better"] is None  # identical proofs: no winner
    assert pairs[("elegant", "gapped")]["d"] is None  # gapped has no quality values
