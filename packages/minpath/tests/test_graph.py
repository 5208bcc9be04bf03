"""The Typed Reasoning Graph and the Minimal Dependency Path, on hand-written CoTs."""

import networkx as nx
import pytest
from minpath import (
    CycleError,
    MinPathError,
    ModelTyper,
    build_graph,
    compress,
    derivable,
    min_path,
    segment,
    typed_steps,
)
from minpath.graph import QUESTION

from paperstack.llm import RuleAgent

COT = "\n".join(
    [
        "The problem is 3+4*2-5.",  # 0 restatement
        "First do * then + and -.",  # 1 planning
        "4*2=8",  # 2 computation (needed)
        "Check: 2*4=8",  # 3 verification
        "3+4=7",  # 4 distractor computation
        "3+8=12",  # 5 wrong step
        "12-5=7",  # 6 uses the wrong value
        "Wait, 3+8=11",  # 7 backtracking: revises 5, invalidates 5 and 6
        "11-5=6",  # 8 computation (needed)
        "So the result is 6.",  # 9 restatement
        "Answer: 6",  # 10 conclusion
    ]
)
QUESTION_TEXT = "3+4*2-5="


def test_rule_typer_types_every_kind_of_step():
    types = [s.type for s in typed_steps(COT)]
    assert types == [
        "restatement", "planning", "computation", "verification", "computation",
        "computation", "computation", "backtracking", "computation", "restatement",
        "conclusion",
    ]  # fmt: skip


def test_graph_is_a_dag_with_def_use_edges_to_the_latest_valid_definition():
    steps = typed_steps(COT)
    g = build_graph(QUESTION_TEXT, steps)
    assert isinstance(g, nx.DiGraph)
    assert nx.is_directed_acyclic_graph(g)
    assert g.has_edge(QUESTION, 2)
    assert g.has_edge(2, 5)
    assert g.has_edge(5, 6)  # 12-5 used the wrong 12
    assert g.has_edge(7, 8)  # 11 comes from the revision
    assert g.has_edge(8, 10)  # the answer 6 comes from 11-5=6


def test_backtracking_invalidates_the_revised_step_and_what_used_it():
    g = build_graph(QUESTION_TEXT, typed_steps(COT))
    assert not g.nodes[5]["valid"]
    assert not g.nodes[6]["valid"]
    assert all(g.nodes[i]["valid"] for i in (2, 3, 4, 7, 8, 10))


def test_invalidated_producer_is_never_used_later():
    cot = "2+3=6\n6*2=12\nWait, 2+3=5\n5*2=10\nAnswer: 10"
    g = build_graph("2+3*2=", typed_steps(cot))
    assert not g.nodes[0]["valid"]
    assert not g.nodes[1]["valid"]
    assert g.has_edge(2, 3)


def test_min_path_keeps_the_conclusions_ancestors_only():
    steps = typed_steps(COT)
    kept = min_path(build_graph(QUESTION_TEXT, steps), steps)
    assert kept == {2, 7, 8, 10}


def test_min_path_takes_the_cheapest_of_duplicate_producers():
    # The same quantity computed twice: the verbose one first, the terse one later. The latest
    # definition is the terse one; put the cheap one first to see the choice is by cost.
    cot = "2*3=6\nSo multiplying the two numbers we get 3*2=6 for sure\n6+1=7\nAnswer: 7"
    steps = typed_steps(cot)
    assert steps[1].type == "verification"  # re-derives an existing quantity
    g = build_graph("2*3+1=", steps)
    assert min_path(g, steps) == {0, 2, 3}
    cot2 = "Multiplying the two numbers we get 3*2=6 for sure\n2*3=6\n6+1=7\nAnswer: 7"
    steps2 = typed_steps(cot2)
    g2 = build_graph("2*3+1=", steps2)
    assert min_path(g2, steps2) == {1, 2, 3}


def test_compress_renders_the_minimal_path_and_checks_it():
    c = compress(QUESTION_TEXT, COT, gold_answer=6)
    assert c.compressed
    assert c.text == "4*2=8\n3+8=11\n11-5=6\nAnswer: 6"
    assert derivable(QUESTION_TEXT, c.text) == (True, "")


def test_cot_without_a_final_answer_falls_back_and_says_why():
    c = compress(QUESTION_TEXT, "4*2=8\n3+8=11\n11-5=6")
    assert not c.compressed
    assert c.text == "4*2=8\n3+8=11\n11-5=6"
    assert "no final answer" in c.fallback


def test_not_derivable_compression_falls_back_to_the_original():
    # The answer is never computed: the graph has no producer for 9, so the path is only the
    # conclusion, which does not derive it; the original is kept.
    cot = "4*2=8\nAnswer: 9"
    c = compress("4*2+1=", cot)
    assert not c.compressed
    assert c.text == cot
    assert c.fallback.startswith("not derivable")
    wrong = compress(QUESTION_TEXT, COT, gold_answer=7)
    assert not wrong.compressed
    assert "differs from the gold 7" in wrong.fallback


def test_a_task_checker_can_veto_a_compression():
    c = compress(QUESTION_TEXT, COT, check=lambda text: False)
    assert not c.compressed
    assert "step checker" in c.fallback


def test_dependency_cycle_is_one_error_naming_it():
    with pytest.raises(CycleError, match=r"cycle: .*8 -> .*"):
        compress(QUESTION_TEXT, COT, extra_edges=[(10, 8)])
    with pytest.raises(MinPathError, match="step 99 does not exist"):
        build_graph(QUESTION_TEXT, typed_steps(COT), extra_edges=[(0, 99)])


def test_segment_splits_at_discourse_markers():
    steps = segment("3+8=12. Wait, 3+8=11.\n\nAnswer: 11")
    assert [s.text for s in steps] == ["3+8=12.", "Wait, 3+8=11.", "Answer: 11"]
    with pytest.raises(MinPathError, match="must be text"):
        segment(b"4*2=8")  # type: ignore[arg-type]


class _Labeller(RuleAgent):
    """A scripted model typer: answers from the step text, one reply it cannot parse."""

    def respond(self, messages):
        step = messages[-1]["content"].split("Step: ")[1].split("\n")[0]
        if step.startswith("Answer"):
            return "conclusion"
        if step.startswith("So"):
            return "I am not sure"
        return "computation" if "=" in step else "restatement"


def test_model_typer_asks_a_chat_model_and_records_its_fallbacks():
    typer = ModelTyper(_Labeller())
    steps = typed_steps(COT, typer)
    assert typer.asked == len(steps)
    assert typer.fallbacks == 1  # "So the result is 6." -> the rule type, counted
    assert steps[9].type == "restatement"
    assert steps[3].type == "computation"  # the model's call, not the rules'
    c = compress(QUESTION_TEXT, COT, typer=ModelTyper(_Labeller()), gold_answer=6)
    assert c.compressed


def test_model_typer_through_a_real_transformers_model(micro):
    """A random micro Llama through TransformersChat: it names no type, so every step falls
    back to the rules, and the counts say so."""
    from paperstack.llm import TransformersChat

    model, tok = micro
    typer = ModelTyper(TransformersChat(model, tok), max_new_tokens=4)
    steps = typed_steps(COT, typer)
    assert typer.asked == len(steps) == 11
    assert typer.fallbacks == typer.asked  # a random model names no type: all recorded
    assert [s.type for s in steps] == [s.type for s in typed_steps(COT)]
