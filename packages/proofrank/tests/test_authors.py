"""The authors' definitions on the LLM path (verified rewrites, pairwise comparisons with ties
in both orders, entropy of clustered core ideas), with a scripted judge model: fast, no server."""

import json
import math
import re

import pytest
from proofrank.cli import main
from proofrank.judges import JudgeRequest, LLMJudge, RuleJudge
from proofrank.leaderboard import evaluate, pairwise_load
from proofrank.problems import shipped_problems
from proofrank.prompts import JudgeParseError, parse_clusters, parse_pairwise
from proofrank.provers import scripted_provers
from proofrank.scoring import cluster_entropy, preference, rewrite_ratio

from paperstack.llm import Recorder, RuleAgent

TEST = shipped_problems().split("test")
FEW = TEST.subset(TEST.ids[:3])


def _between(text, start, end=None):
    tail = text.split(start, 1)[1]
    return (tail.split(end, 1)[0] if end else tail).strip()


class AuthorsJudge(RuleAgent):
    """A scripted judge model for the authors' prompts: every proof is correct; a rewrite keeps
    the lines with mathematics (and the verifier accepts it unless it is empty); the pairwise
    computation judge prefers the proof with more ``$`` (a tie when equal), or always answers
    ``fixed``; a core idea is the proof's first line; clusters group identical ideas."""

    def __init__(self, fixed=None, broken=()):
        super().__init__(0, name="authors-judge")
        self.fixed = fixed
        self.broken = set(broken)

    def respond(self, messages):
        text = messages[-1]["content"]
        if "Is the proof to grade correct" in text:
            return "\\boxed{correct}"
        if text.startswith("Rewrite the following proof"):
            proof = _between(text, "Proof:\n")
            return "\n".join(ln for ln in proof.splitlines() if "$" in ln)
        if "was rewritten to be less verbose" in text:
            return "\\boxed{yes}" if _between(text, "Rewritten proof:\n") else "\\boxed{no}"
        if "comparing two proofs" in text:
            if "pairwise" in self.broken:
                return "Both are fine."
            if self.fixed is not None:
                return f"\\boxed{{{self.fixed}}}"
            one = _between(text, "Proof 1:\n", "Proof 2:\n").count("$")
            two = _between(text, "Proof 2:\n").count("$")
            return "\\boxed{0}" if one == two else f"\\boxed{{{1 if one > two else 2}}}"
        if text.startswith("Identify the central idea"):
            return _between(text, "Proof:\n").splitlines()[0]
        if "Group them by method" in text:
            ideas = re.findall(r"^Proof (\d+): (.*)$", text, re.MULTILINE)
            groups = {}
            for k, idea in ideas:
                groups.setdefault(idea, []).append(int(k))
            box = json.dumps([{"name": f"c{i}", "members": m} for i, m in
                              enumerate(groups.values())])  # fmt: skip
            return f"Clusters: \\boxed{{{box}}}"
        return "\\boxed{yes}"


def test_the_authors_formulas():
    assert cluster_entropy([0, 0, 1, 1]) == pytest.approx(1.0)
    assert cluster_entropy([0, 1, 2]) == pytest.approx(math.log2(3))
    assert cluster_entropy([0, 0, 0]) == 0.0
    assert cluster_entropy([0]) == 0.0
    assert cluster_entropy([]) is None
    assert rewrite_ratio("one two three four", ["one two", "one two three four five six"]) == 1.0
    assert rewrite_ratio("one two", []) is None  # no accepted rewrite: no score, not 1
    assert preference([1, 0, -1, 1]) == 0.25
    assert preference([]) is None


def test_pairwise_and_cluster_answers_parse_or_fail():
    assert parse_pairwise("... Verdict: $$\\boxed{2}$$") == 2
    assert parse_pairwise("\\boxed{0}") == 0
    with pytest.raises(JudgeParseError):
        parse_pairwise("\\boxed{3}")
    box = '\\boxed{[{"name": "a", "members": [2]}, {"name": "b", "members": [1, 3]}]}'
    assert parse_clusters(box, 3) == [0, 1, 0]
    with pytest.raises(JudgeParseError, match="no cluster"):
        parse_clusters('\\boxed{[{"name": "a", "members": [1]}]}', 2)
    with pytest.raises(JudgeParseError, match="two clusters"):
        parse_clusters('\\boxed{[{"members": [1]}, {"members": [1, 2]}]}', 2)
    with pytest.raises(JudgeParseError, match="not JSON"):
        parse_clusters("\\boxed{two clusters}", 2)


def test_pairwise_comparisons_are_asked_in_both_orders():
    """A judge that always says "proof 1" (pure position bias) gives a mean vote of 0 for
    every pair: the order swap cancels it; an unparseable comparison is a failure, not 0."""
    p = FEW[0]
    a, b = p.references[0].proof, p.references[-1].proof
    biased = LLMJudge(AuthorsJudge(fixed=1))
    assert biased.compare("computation", [(p, a, b)]) == [0.0]
    assert biased.ledger.calls == 2
    broken = LLMJudge(AuthorsJudge(broken={"pairwise"}))
    assert broken.compare("complexity", [(p, a, b)]) == [None]
    assert [f.aspect for f in broken.failures] == ["pairwise_complexity"]


@pytest.fixture(scope="module")
def authors_runs():
    provers = scripted_provers(FEW, ("elegant", "verbose", "single-technique",
                                     "technique-following"))  # fmt: skip
    judge = LLMJudge(AuthorsJudge())
    runs = {
        s: evaluate(p, FEW, judge, samples=2, name=s, measures="authors")
        for s, p in provers.items()
    }
    pairwise_load(runs, FEW, judge, "computation")
    return runs


def test_the_authors_measures_order_known_provers(authors_runs):
    def mean(style, metric):
        v = authors_runs[style].values(metric)
        assert v, (style, metric)
        return sum(v.values()) / len(v)

    # conciseness: the padded proofs shrink under a verified rewrite, the elegant ones do not
    assert mean("verbose", "rewrite_ratio") > mean("elegant", "rewrite_ratio") + 0.1
    assert mean("elegant", "rewrite_ratio") == pytest.approx(1.0, abs=0.05)
    # computation load: the verbose proofs (more mathematics to read) lose the comparisons
    assert mean("verbose", "computation_load") > mean("elegant", "computation_load")
    # diversity: one method per problem has one cluster (0 bits)
    assert mean("single-technique", "idea_entropy") == 0.0
    assert mean("technique-following", "idea_entropy") >= 0.0
    # the proxies' judge questions were not asked (authors' path): no tier, no labels
    assert authors_runs["elegant"].values("tier") == {}
    assert authors_runs["elegant"].values("label_diversity") == {}
    rows = {r.metric for r in authors_runs["verbose"].rows()}
    assert {"rewrite_ratio", "computation_load", "idea_entropy"} <= rows


def test_authors_answers_are_recorded_and_replayed(tmp_path):
    p = FEW[0]
    item = [(p, "We are asked to prove it.\n" + p.references[0].proof)]
    cassette = tmp_path / "judge.jsonl"
    with Recorder(AuthorsJudge(), cassette) as rec:
        first = LLMJudge(rec).rewrite_ratios(item)
    with Recorder(None, cassette, mode="replay") as rep:
        again = LLMJudge(rep).rewrite_ratios(item)
        assert rep.hits == 2  # one rewrite, one verification
    assert first == again
    assert first[0] > 1


def test_the_authors_measures_need_an_llm_judge(tmp_path, capsys):
    with pytest.raises(Exception, match="need an LLM judge"):
        evaluate(scripted_provers(FEW)["elegant"], FEW, RuleJudge(), measures="authors")
    with pytest.raises(SystemExit) as exc:
        main(["leaderboard", "--base-url", "http://127.0.0.1:9/v1", "--prover", "m",
              "--measures", "authors", "--out", str(tmp_path / "o")])  # fmt: skip
    assert exc.value.code == 2
    assert "needs --judge-model" in capsys.readouterr().err


def test_a_rewrite_the_verifier_rejects_gives_no_ratio():
    p = FEW[0]
    judge = LLMJudge(AuthorsJudge())
    # a proof with no mathematics: the scripted rewrite is empty, the verifier says no
    [ratio] = judge.rewrite_ratios([(p, "It is clear.\nSo it holds.")])
    assert ratio is None
    assert [f.aspect for f in judge.failures] == ["rewrite"]
    assert JudgeRequest(p, "x").steps == ("x",)
