import pytest
from proofrank.agreement import cohen_kappa, gapped, judge_agreement
from proofrank.judges import JudgeRequest, LLMJudge, RuleJudge
from proofrank.problems import shipped_problems

from paperstack.llm import Recorder, RuleAgent

PROBLEMS = shipped_problems()


class BoxJudge(RuleAgent):
    """A scripted judge model: answers every judge prompt with a fixed box per aspect;
    ``broken`` aspects get an answer with no box (must become a judge failure)."""

    def __init__(self, broken=()):
        super().__init__(0, name="box-judge")
        self.broken = set(broken)

    def respond(self, messages):
        text = messages[-1]["content"]
        aspect = (
            "correct" if "correct and complete" in text
            else "unnecessary" if "could be deleted" in text
            else "calculation" if "routine calculation" in text
            else "techniques" if "Which of these techniques" in text
            else "uses_technique"
        )  # fmt: skip
        if aspect in self.broken:
            return "I think it is fine."
        return {
            "correct": "Checked. \\boxed{correct}",
            "unnecessary": "\\boxed{none}",
            "calculation": "\\boxed{1}",
            "techniques": "\\boxed{am-gm}",
            "uses_technique": "\\boxed{yes}",
        }[aspect]


def test_rule_judge_certifies_references_and_rejects_gapped_ones():
    judge = RuleJudge()
    test = PROBLEMS.split("test")
    refs = [JudgeRequest(p, r.proof) for p in test for r in p.references]
    assert all(a.correct for a in judge.assess(refs, ("correct",)))
    gaps = [JudgeRequest(p, "\n".join(gapped(r))) for p in test for r in p.references]
    verdicts = [a.verdict for a in judge.assess(gaps, ("correct",))]
    assert "correct" not in verdicts
    # It cannot refute a gap, only fail to certify it (a one-step reference minus its step is
    # empty: that one is soundly incorrect).
    assert set(verdicts) <= {"unverified", "incorrect"}
    assert verdicts.count("unverified") > verdicts.count("incorrect")


def test_rule_judge_says_unverified_not_incorrect_for_a_new_proof():
    """A correct proof outside the references (issue #49): unverified, never incorrect; no
    quality is computed for it, and only sound refutations are incorrect."""
    p = PROBLEMS.get("ineq-01")
    new = (
        "Let $x = \\frac{a}{b} > 0$.\n"
        "Then $\\frac{a}{b} + \\frac{b}{a} - 2 = x + \\frac{1}{x} - 2 = \\frac{(x-1)^2}{x} \\ge 0$."
    )
    a, b, c = RuleJudge().assess(
        [JudgeRequest(p, new), JudgeRequest(p, "I cannot prove this."), JudgeRequest(p, "QED")]
    )
    assert a.verdict == "unverified"
    assert a.correct is None
    assert not a.failures  # not a judge failure either
    assert a.unnecessary is None
    assert a.techniques is None
    assert "no reference" in a.reason
    assert b.verdict == "incorrect"
    assert c.verdict == "incorrect"
    # a proof by contradiction states a false identity: not a refutation
    contra = "Suppose $a/b + b/a < 2$.\nThen $0 = 1$, a contradiction."
    [d] = RuleJudge().assess([JudgeRequest(p, contra)])
    assert d.verdict == "unverified"


def test_rule_judge_finds_padding_as_unnecessary():
    p = PROBLEMS.get("ineq-02")
    proof = "\n".join(
        [f"We are asked to prove the following. {p.statement}", *p.reference("elegant").steps]
    )
    [a] = RuleJudge().assess([JudgeRequest(p, proof)])
    assert a.correct
    assert a.unnecessary == frozenset({0})


def test_llm_judge_parses_boxes_and_gates():
    p = PROBLEMS.get("ineq-02")
    judge = LLMJudge(BoxJudge())
    [a] = judge.assess([JudgeRequest(p, p.references[0].proof, "am-gm")])
    assert a.correct is True
    assert a.unnecessary == frozenset()
    assert a.calculation == frozenset({0})
    assert a.techniques == frozenset({"am-gm"})
    assert a.uses_technique is True
    assert judge.ledger.calls == 5
    assert not judge.failures


def test_unparseable_judge_answers_are_counted_failures_never_scores():
    p = PROBLEMS.get("ineq-02")
    judge = LLMJudge(BoxJudge(broken={"correct"}))
    [a] = judge.assess([JudgeRequest(p, p.references[0].proof)])
    assert a.correct is None
    assert a.techniques is None
    assert [f.aspect for f in judge.failures] == ["correct"]
    assert "no \\boxed" in judge.failures[0].reason
    judge = LLMJudge(BoxJudge(broken={"techniques"}))
    [a] = judge.assess([JudgeRequest(p, p.references[0].proof)])
    assert a.correct is True
    assert a.techniques is None
    assert a.failed("techniques")


def test_judge_answers_are_recorded_and_replayed(tmp_path):
    p = PROBLEMS.get("ineq-02")
    cassette = tmp_path / "judge.jsonl"
    req = [JudgeRequest(p, p.references[0].proof)]
    with Recorder(BoxJudge(), cassette) as rec:
        first = LLMJudge(rec).assess(req)
    with Recorder(None, cassette, mode="replay") as rep:
        again = LLMJudge(rep).assess(req)
        assert rep.hits == 4
    assert first == again


def test_judge_agreement_with_labels_and_between_judges():
    test = PROBLEMS.split("test")
    ag = judge_agreement(RuleJudge(), test)
    acc = next(r for r in ag.rows if r.metric == "certify_accuracy")
    assert acc.k == acc.n  # certifies every reference of the test split and no gapped one
    refuted = next(r for r in ag.rows if r.metric == "refuted_references")
    assert refuted.k == 0
    assert ag.kappa_calc is not None
    assert 0 < ag.kappa_calc < 1
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    assert cohen_kappa([True, False], [False, True]) == -1.0
    assert cohen_kappa([True, True], [True, True]) is None
    with pytest.raises(ValueError, match="labels"):
        cohen_kappa([True], [True, False])


def test_an_empty_proof_is_incorrect_without_a_judge_failure():
    p = PROBLEMS.get("ineq-02")
    judge = LLMJudge(BoxJudge())
    [a] = judge.assess([JudgeRequest(p, "  \nQED\n")])
    assert a.correct is False
    assert not a.failures
    assert judge.ledger.calls == 0
