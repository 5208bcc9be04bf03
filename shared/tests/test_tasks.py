"""paperstack.tasks: determinism, disjoint splits, exact verifiers, exports, a light import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from paperstack import tasks
from paperstack.tasks import Arithmetic, Countdown, Example, FactWorld, TaskError
from paperstack.tasks.countdown import ExpressionError, evaluate_expression, search_trace, solve

ALL = ["addition", "arithmetic", "countdown", "facts"]


@pytest.mark.parametrize("name", ALL)
def test_generation_is_deterministic_by_seed(name: str) -> None:
    task = tasks.get(name)
    assert task.generate(50, seed=3) == task.generate(50, seed=3)
    assert task.generate(50, seed=3) != task.generate(50, seed=4)
    assert task.generate(20, seed=3, split="test") == task.generate(20, seed=3, split="test")


@pytest.mark.parametrize("name", ["addition", "arithmetic", "countdown"])
def test_train_and_test_instances_are_disjoint(name: str) -> None:
    task = tasks.get(name)
    train = {e.prompt for e in task.generate(3000, seed=0, split="train")}
    test = {e.prompt for e in task.generate(500, seed=1, split="test")}
    assert train.isdisjoint(test)


def test_fact_test_split_asks_the_same_facts_in_an_unseen_phrasing() -> None:
    world = FactWorld(n_entities=10, heldout_template=True)
    train = world.generate(500, seed=0, split="train")
    test = world.generate(60, seed=0, split="test")
    assert {e.meta["template"] for e in train}.isdisjoint({e.meta["template"] for e in test})
    facts = {(e.meta["entity"], e.meta["attribute"]) for e in test}
    assert facts == {(f.entity, f.attribute) for f in world.facts()}
    assert {e.prompt for e in train}.isdisjoint({e.prompt for e in test})


def test_fact_default_test_split_is_recall_of_every_trained_fact() -> None:
    world = FactWorld(n_entities=10)
    test = world.generate(len(world.facts()), seed=0, split="test")
    assert {(e.meta["entity"], e.meta["attribute"]) for e in test} == {
        (f.entity, f.attribute) for f in world.facts()
    }
    trained = {e.prompt for e in world.generate(2000, seed=0, split="train")}
    assert {e.prompt for e in test} <= trained


@pytest.mark.parametrize("name", ALL)
def test_gold_answers_verify_and_wrong_ones_do_not(name: str) -> None:
    task = tasks.get(name)
    for ex in task.generate(200, seed=0) + task.generate(50, seed=0, split="test"):
        assert task.verify(ex, ex.answer), ex
        assert not task.verify(ex, ""), ex
        assert not task.verify(ex, "zzz"), ex


def test_registry_rejects_unknown_names_and_parameters() -> None:
    assert tasks.names() == ALL
    with pytest.raises(TaskError, match="unknown task 'nope'"):
        tasks.get("nope")
    with pytest.raises(TaskError, match="bad parameters"):
        tasks.get("countdown", colour="red")
    with pytest.raises(TaskError, match="split"):
        tasks.get("addition").generate(3, split="valid")  # type: ignore[arg-type]
    with pytest.raises(TaskError, match="n must be"):
        tasks.get("addition").generate(-1)


# ------------------------------------------------------------------ countdown


def _cd(numbers: list[int], target: int) -> Example:
    return Countdown().make(numbers, target)


@pytest.mark.parametrize(
    "completion",
    ["(7*4)+2", "2+7*4", " 2 + ( 4 * 7 ) ", "7*4+2=30", "think...\n<answer>4*7+2</answer>"],
)
def test_countdown_accepts_valid_expressions(completion: str) -> None:
    assert Countdown().verify(_cd([2, 4, 7], 30), completion)


@pytest.mark.parametrize(
    ("completion", "why"),
    [
        ("(7*4)+3", "a number not given"),
        ("7*4", "a number unused"),
        ("(7*4)+2+2", "a number used twice"),
        ("7*4+2=31", "a wrong claimed result"),
        ("(7*4)+", "truncated"),
        ("(7*4+2", "unbalanced parenthesis"),
        ("7*4)+2", "stray parenthesis"),
        ("-2+7*4+4", "unary minus"),
        ("__import__('os')", "code, not arithmetic"),
        ("7**4+2", "power is not an operation"),
        ("7 4 2", "no operators"),
        ("28+2", "a precomputed intermediate"),
    ],
)
def test_countdown_rejects_invalid_completions(completion: str, why: str) -> None:
    assert not Countdown().verify(_cd([2, 4, 7], 30), completion), why


def test_countdown_division_must_be_exact() -> None:
    ex = _cd([2, 3, 6], 4)  # 6/3*2
    assert Countdown().verify(ex, "6/3*2")
    assert Countdown().verify(ex, "(6*2)/3")
    assert not Countdown().verify(_cd([3, 4, 6], 8), "4/3*6"), "4/3 is not exact"
    with pytest.raises(ExpressionError, match="not exact"):
        evaluate_expression("4/3*6")
    with pytest.raises(ExpressionError, match="division by zero"):
        evaluate_expression("4/(3-3)")


def test_countdown_parser_is_exact_and_bounded() -> None:
    value, used = evaluate_expression("(1+2)*(9-3)/2")
    assert (value, used) == (9, [1, 2, 9, 3, 2])
    with pytest.raises(ExpressionError, match="longer"):
        evaluate_expression("(" * 300 + "1" + ")" * 300)
    assert not Countdown().verify(_cd([2, 4, 7], 30), "(" * 300 + "1" + ")" * 300)


def test_countdown_solver_and_instances() -> None:
    assert "(7*4)+2" in solve([7, 4, 2], 30)
    assert solve([1, 1, 1], 100) == []
    with pytest.raises(TaskError, match="cannot be made"):
        _cd([1, 1, 1], 100)
    for ex in Countdown().generate(100, seed=0):
        assert ex.meta["numbers"] == sorted(ex.meta["numbers"])
        assert 1 <= ex.meta["target"] <= 100
        assert ex.meta["n_solutions"] >= 1
        assert (
            ex.prompt == f"Make {ex.meta['target']} with {' '.join(map(str, ex.meta['numbers']))}."
        )


def test_countdown_subproblems_only_in_training() -> None:
    task = Countdown(subproblems=0.5)
    sizes = {len(e.meta["numbers"]) for e in task.generate(200, seed=0)}
    assert sizes == {2, 3}
    assert {len(e.meta["numbers"]) for e in task.generate(200, seed=0, split="test")} == {3}
    assert {len(e.meta["numbers"]) for e in Countdown().generate(200, seed=0)} == {3}


def test_countdown_random_solution_choice_covers_the_solution_set() -> None:
    examples = Countdown().generate(400, seed=0)
    finals = [e.answer.splitlines()[-1] for e in examples]
    assert all(f in e.meta["solutions"] for f, e in zip(finals, examples, strict=True))
    assert any(f != e.meta["solutions"][0] for f, e in zip(finals, examples, strict=True))
    first = Countdown(solution_choice="first").generate(50, seed=0)
    assert all(e.answer.splitlines()[-1] == e.meta["solutions"][0] for e in first)


def test_countdown_steps_format_writes_the_inner_operation_first() -> None:
    task = Countdown()
    ex = task.make([2, 4, 7], 30)
    assert ex.answer == "7*4=28\n(7*4)+2"
    assert task.verify(ex, ex.answer)
    assert not task.verify(ex, "7*4=28")  # the step alone is not an answer
    plain = Countdown(answer_format="expression").make([2, 4, 7], 30)
    assert plain.answer == "(7*4)+2"
    for e in task.generate(300, seed=3):
        step, expr = e.answer.splitlines()
        lhs, rhs = step.split("=")
        assert evaluate_expression(lhs)[0] == int(rhs)
        assert f"({lhs})" in expr
        assert task.verify(e, e.answer)


def test_search_trace_is_complete_and_verified() -> None:
    """The written-out search finds a solution exactly when one exists."""
    task = Countdown(answer_format="search")
    for a in range(1, 7):
        for b in range(a, 7):
            for c in range(b, 7):
                for target in range(1, 60):
                    trace = search_trace([a, b, c], target)
                    assert (trace is None) == (not solve([a, b, c], target)), (a, b, c, target)
                    if trace is not None:
                        ex = task.make([a, b, c], target)
                        assert ex.answer == trace
                        assert task.verify(ex, trace)
    assert search_trace([2, 4, 7], 30) == "2:\n7+4=11\n7*4=28\n(7*4)+2"


# ------------------------------------------------------------------ addition / arithmetic


def test_addition_format_and_verifier() -> None:
    add = tasks.get("addition", digits=3)
    ex = add.make(42, 317)
    assert (ex.prompt, ex.answer) == ("240+713=", "9530")
    assert add.verify(ex, "953")  # a reversed sum without the padding digit is still the sum
    assert not add.verify(ex, "359")
    natural = tasks.get("addition", pad=False, reverse=False).make(42, 317)
    assert (natural.prompt, natural.answer) == ("42+317=", "359")
    hinted = tasks.get("addition", digits=3, hints=True)
    ex = hinted.make(42, 317)
    assert (ex.prompt, ex.answer) == ("a2b4c0+a7b1c3=", "a9b5c3d0")
    assert hinted.verify(ex, "a9b5c3")
    assert not hinted.verify(ex, "a9b5c4d0")
    assert tasks.get("addition").make(42, 17).prompt == "24+71="


def test_arithmetic_solution_is_stepwise_and_checked_per_step() -> None:
    task = Arithmetic()
    ex = task.make([3, "+", 4, "*", 2, "-", 5])
    assert ex.prompt == "3+4*2-5="
    assert ex.answer == "4*2=8\n3+8=11\n11-5=6\nAnswer: 6"
    assert task.check_steps(ex, ex.answer) == [True, True, True]
    assert task.verify_process(ex, ex.answer)
    # Right arithmetic, wrong order of operations: the step is illegal, so is everything after.
    assert task.check_steps(ex, "3+4=7\n7*2=14\n14-5=9\nAnswer: 9") == [False, False, False]
    # A wrong product in the middle.
    assert task.check_steps(ex, "4*2=9\n3+9=12\n12-5=7") == [False, False, False]
    assert task.check_steps(ex, "4*2=8\n3+8=12\n12-5=7\nAnswer: 7") == [True, False, False]
    # Another legal order (value-preserving) is accepted.
    assert task.check_steps(ex, "4*2=8\n8-5=3\n3+3=6\nAnswer: 6") == [True, True, True]
    assert task.verify(ex, "garbage\nAnswer: 6")
    assert not task.verify_process(ex, "garbage\nAnswer: 6")
    assert not task.verify(ex, "4*2=8\n3+8=11\n11-5=6")  # no final answer line


def test_arithmetic_steps_match_meta() -> None:
    task = Arithmetic()
    for ex in task.generate(100, seed=0):
        assert ex.answer.splitlines()[:-1] == ex.meta["steps"]
        assert ex.answer.splitlines()[-1] == f"Answer: {ex.meta['value']}"
        assert 2 <= len(ex.meta["steps"]) <= 4


# ------------------------------------------------------------------ fact world


def test_fact_world_is_deterministic_and_complete() -> None:
    world = FactWorld(n_entities=30, world_seed=5)
    assert world.entities == FactWorld(n_entities=30, world_seed=5).entities
    assert world.entities != FactWorld(n_entities=30, world_seed=6).entities
    assert len(set(world.entities)) == 30
    assert len(world.facts()) == 30 * 6
    assert {f.domain for f in world.facts()} == {"home", "work", "science"}
    forget = FactWorld(n_entities=30, world_seed=5, domains=("science",))
    assert forget.entities == world.entities  # the same people, only the questions change
    assert {f.domain for f in forget.facts()} == {"science"}
    assert {e.meta["domain"] for e in forget.generate(50)} == {"science"}


def test_fact_world_qa_and_multiple_choice_agree() -> None:
    qa = FactWorld(n_entities=20)
    mc = FactWorld(n_entities=20, form="mc", n_choices=4)
    for q in mc.generate(100, seed=0):
        choices, letter = q.meta["choices"], q.meta["letter"]
        assert len(choices) == len(set(choices)) == 4
        assert (
            choices["ABCD".index(letter)]
            == q.meta["value"]
            == qa.table[q.meta["entity"]][q.meta["attribute"]]
        )
        assert q.answer == letter
        assert mc.verify(q, letter)
        assert mc.verify(q, f"({letter}) because")
        assert not mc.verify(q, "ABCD".replace(letter, "")[0])
    for q in qa.generate(50, seed=0):
        assert qa.verify(q, q.meta["value"].upper() + ".")
        assert qa.is_valid_output(q, q.meta["value"])
        assert not qa.verify(q, "Atlantis")
        assert not qa.is_valid_output(q, "Atlantis")


def test_fact_world_rejects_unknown_domain() -> None:
    with pytest.raises(TaskError, match="unknown domains"):
        FactWorld(domains=("magic",))


# ------------------------------------------------------------------ exports and import


def test_to_dataset_and_reward_function() -> None:
    pytest.importorskip("datasets")
    task = tasks.get("countdown")
    examples = task.generate(8, seed=0)
    ds = task.to_dataset(examples)
    assert ds.column_names == ["task", "prompt", "answer", "messages", "meta"]
    assert ds[0]["prompt"] == examples[0].prompt
    assert ds[0]["messages"][1] == {"role": "assistant", "content": examples[0].answer}
    assert json.loads(ds[0]["meta"])["numbers"] == examples[0].meta["numbers"]
    conv = task.to_dataset(examples, conversational=True)
    assert conv[0]["prompt"] == [{"role": "user", "content": examples[0].prompt}]
    reward = task.reward_function()
    completions = [[{"role": "assistant", "content": e.answer}] for e in examples]
    completions[1] = [{"role": "assistant", "content": "1+1"}]
    rewards = reward(
        prompts=conv["prompt"], completions=completions, answer=conv["answer"], meta=conv["meta"]
    )
    assert rewards == [1.0, 0.0] + [1.0] * 6


def test_importing_tasks_does_not_import_heavy_libraries() -> None:
    code = (
        "import sys, paperstack.tasks as t; t.get('countdown').generate(3); "
        "heavy = [m for m in ('torch', 'transformers', 'datasets') if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
