"""The harness: budgets, tampering, unparseable answers, the cost card, parse_action."""

import json

import pytest
from pcbinnobench.agents import HeuristicAgent, OracleAgent
from pcbinnobench.errors import PcbBenchError
from pcbinnobench.harness import Budget, cost_card, parse_action, run_episode


class _Say:
    name = "say"

    def __init__(self, *answers):
        self.answers = list(answers)

    def generate(self, prompts, **kwargs):
        turn = sum(1 for m in prompts[0] if m["role"] == "assistant")
        return [[self.answers[min(turn, len(self.answers) - 1)]]]

    def logprobs(self, prompts, continuations):
        raise NotImplementedError


def test_parse_action_finds_fenced_and_bare_json():
    assert parse_action('ok ```json\n{"tool": "done", "args": {}}\n```')["tool"] == "done"
    assert parse_action('I will {"tool": "summary", "args": {"path": "a"}} now')["args"] == {
        "path": "a"
    }
    assert parse_action('{"x": 1} then {"tool": "done"}') == {"tool": "done", "args": {}}
    assert parse_action("no json here") is None


def test_an_outside_edit_fails_the_episode(task):
    def tamper(box, step):
        if step == 1:
            pcb = next(box.root.glob("*.kicad_pcb"))
            pcb.write_text(pcb.read_text() + "\n")

    ep = run_episode(task, OracleAgent(task.solution()), "guided", observer=tamper)
    assert not ep.passed
    assert ep.result.checks[0].name == "workspace_integrity"
    clean = run_episode(task, OracleAgent(task.solution()), "guided")
    assert clean.passed


def test_budgets_and_unparseable_answers_end_the_episode(task):
    ep = run_episode(
        task, _Say('{"tool": "list_files", "args": {}}'), "objective", Budget(max_calls=4)
    )
    assert ep.stop == "budget: model calls"
    assert ep.calls == 4
    assert not ep.passed
    ep = run_episode(task, _Say("I am thinking"), "objective")
    assert ep.stop == "no parseable action three times"
    assert ep.calls == 3
    ep = run_episode(
        task,
        _Say('{"tool": "read_file", "args": {"path": "x"}}'),
        "objective",
        Budget(max_tokens=10),
    )
    assert ep.stop == "budget: tokens"
    with pytest.raises(PcbBenchError):
        Budget(max_calls=0)


def test_an_agent_deleting_the_board_gets_a_failed_check(task):
    pcb = next(task.workspace.glob("*.kicad_pcb")).name
    ep = run_episode(
        task,
        _Say(
            json.dumps({"tool": "delete_file", "args": {"path": pcb}}),
            '{"tool": "done", "args": {}}',
        ),
        "objective",
    )
    assert not ep.passed
    assert any(c.name == f"parseable:{pcb}" and c.status == "failed" for c in ep.result.checks)
    assert (task.workspace / pcb).is_file()  # the shipped workspace is untouched


def test_bad_tool_calls_are_observations_not_crashes(task):
    ep = run_episode(
        task,
        _Say(
            json.dumps({"tool": "place", "args": {"ref": "C2", "x": "far"}}),
            json.dumps({"tool": "nope"}),
            json.dumps(
                {
                    "tool": "patch",
                    "args": {
                        "path": next(task.workspace.glob("*.kicad_pcb")).name,
                        "ops": [{"op": "set", "path": "footprint:C2/at", "value": "(at 1"}],
                    },
                }
            ),
            '{"tool": "done", "args": {}}',
        ),
        "objective",
        keep_transcript=True,
    )
    errors = [
        m["content"] for m in ep.transcript if m["role"] == "user" and "error:" in m["content"]
    ]
    assert len(errors) == 3
    assert ep.stop == "done"
    assert not ep.passed


def test_cost_card_counts_calls_tokens_and_tools(tasks):
    eps = [
        run_episode(t, HeuristicAgent(), level)
        for t in tasks[:2]
        for level in ("objective", "guided")
    ]
    card = cost_card(eps)["agents"]
    assert set(card) == {"heuristic/objective", "heuristic/guided"}
    row = card["heuristic/guided"]
    assert row["episodes"] == 2
    assert row["calls"] == sum(e.calls for e in eps[1::2])
    assert row["tool_calls"]["list_files"] == 2
    assert row["estimated_tokens"]
    assert row["prompt_tokens"] > 0


class _FullContext:
    """A model whose every call fails the way a local model with a full context does."""

    name = "full-context"

    def generate(self, *args, **kwargs):
        from paperstack.llm.base import LLMError

        raise LLMError("the prompt (9000 tokens) does not fit the model's 8192 positions")


def test_model_error_ends_the_episode_only_when_asked(task):
    ep = run_episode(task, _FullContext(), "guided", stop_on_model_error=True)
    assert ep.stop.startswith("model error: the prompt (9000 tokens)")
    assert not ep.passed
    from paperstack.llm.base import LLMError

    with pytest.raises(LLMError):  # a served model's failure is the user's to see
        run_episode(task, _FullContext(), "guided")


class _Fails:
    """A served model that answers once, then fails its second call with ``error``."""

    name = "served"

    def __init__(self, error):
        self.error = error
        self.calls = 0

    def generate(self, *args, **kwargs):
        self.calls += 1
        if self.calls > 1:
            raise self.error
        return [['{"tool": "list_files", "args": {}}']]


def test_a_full_served_context_ends_the_episode_any_other_failure_raises(task):
    from paperstack.llm.base import (
        BackendHTTPError,
        BackendUnreachableError,
        ContextOverflowError,
    )

    vllm_400 = BackendHTTPError(
        "HTTP 400: This model's maximum context length is 8192 tokens. However, your request "
        "has 8300 input tokens.",
        400,
    )
    for error in (vllm_400, ContextOverflowError("the prompt is over the served context")):
        ep = run_episode(task, _Fails(error), "guided", stop_on_full_context=True)
        assert ep.stop.startswith("context full: ")
        assert ep.calls == 1
        assert not ep.passed
    for error in (
        BackendUnreachableError("cannot reach the server"),
        BackendHTTPError("HTTP 404: the model `x` does not exist", 404),
        BackendHTTPError("HTTP 500: Internal Server Error", 500),
    ):
        with pytest.raises(type(error)):  # a dead server or a wrong model is the user's to see
            run_episode(task, _Fails(error), "guided", stop_on_full_context=True)
