import math

import numpy as np
import pytest
from proofrank.judges import Assessment, JudgeRequest, RuleJudge
from proofrank.problems import shipped_problems
from proofrank.scoring import (
    adaptivity,
    embedding_diversity,
    label_diversity,
    max_tier,
    score_proof,
)
from proofrank.text import word_count


def test_label_diversity_is_the_mean_pairwise_jaccard_distance():
    a, b, c = frozenset({"am-gm"}), frozenset({"am-gm", "induction"}), frozenset({"calculus"})
    # d(a,b) = 1 - 1/2, d(a,c) = 1, d(b,c) = 1 -> mean 5/6
    assert label_diversity([a, b, c]) == pytest.approx(5 / 6)
    assert label_diversity([a, a, a]) == 0.0
    assert label_diversity([a]) is None


def test_embedding_diversity_is_the_mean_pairwise_cosine_distance():
    x = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    # cosines: 0, 1/sqrt2, 1/sqrt2 -> distances 1, 1-0.7071, 1-0.7071
    want = (1 + 2 * (1 - 1 / math.sqrt(2))) / 3
    assert embedding_diversity(x) == pytest.approx(want)
    assert embedding_diversity(x[:1]) is None


def test_adaptivity_counts_correct_uses_and_leaves_out_failures():
    steps = ("a",)
    items = [
        Assessment(steps, correct=True, uses_technique=True),
        Assessment(steps, correct=True, uses_technique=False),
        Assessment(steps, correct=False),
        Assessment(steps, correct=None),  # judge failure: left out, not a miss
    ]
    assert adaptivity(items) == pytest.approx(1 / 3)
    assert adaptivity([Assessment(steps)]) is None


def test_max_tier_defaults_to_school_mathematics():
    assert max_tier(frozenset()) == 1
    assert max_tier(frozenset({"am-gm", "calculus"})) == 4


def test_score_proof_gates_and_computes_the_proxies():
    problem = shipped_problems().get("ineq-02")
    ref = problem.reference("elegant")
    proof = ref.proof
    [a] = RuleJudge().assess([JudgeRequest(problem, proof)])
    s = score_proof(problem, proof, a)
    assert s.correct is True
    shortest = problem.shortest_reference()
    assert s.verbosity == pytest.approx(word_count(proof) / word_count(shortest.proof))
    assert s.step_ratio == pytest.approx(len(ref.steps) / len(shortest.steps))
    assert s.tier == 2  # AM-GM
    assert s.unnecessary_share == 0.0
    bad = score_proof(problem, "nonsense", Assessment(("nonsense",), correct=False))
    assert bad.correct is False
    assert bad.verbosity is None
    assert bad.tier is None
