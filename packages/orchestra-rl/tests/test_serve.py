"""A real server in the loop: a small swarm of agents served by ``transformers serve``.

The served model is the core's micro tiny Llama with random weights, so its answers are noise;
this pins the runtime against a real OpenAI-compatible server: every call is one HTTP request
issued concurrently from the swarm's pool, the hard budget holds per instance, the trace's
token counts are the server's (never estimated), and the cost card written by ``orchestra
swarm`` equals the sums of the per-instance traces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")

from orchestra_rl.agents import AgentSpec
from orchestra_rl.baselines import FixedTopology
from orchestra_rl.swarm import Swarm, SwarmConfig
from orchestra_rl.tasks import builtin_evaluator, instance_pool

from paperstack.llm import OpenAIChat
from paperstack.testing import SERVED_CONTEXT

pytestmark = pytest.mark.serve


def test_served_swarm_keeps_its_budget_and_counts_the_servers_tokens(openai_server: Any) -> None:
    client = OpenAIChat(openai_server.base_url, openai_server.model, timeout=120, concurrency=4)
    seats = [AgentSpec(client, name=f"s{i}", temperature=0.7, max_new_tokens=8) for i in range(3)]
    swarm = Swarm(seats, builtin_evaluator(("addition",)),
                  SwarmConfig(budget=5, max_rounds=3, concurrency=4))  # fmt: skip
    instances = instance_pool("addition", 2, "test", 0)
    episodes = swarm.run(instances, FixedTopology("ring"), seed=1)
    # Round 0: 3 answers; round 1: the ring delivers to all 3 but only 2 calls are left.
    assert [ep.calls for ep in episodes] == [5, 5]
    assert [ep.denied for ep in episodes] == [1, 1]
    assert all(ep.errors == 0 and ep.timeouts == 0 for ep in episodes)
    calls = [c for ep in episodes for c in ep.trace]
    assert len(calls) == 10
    assert not any(c.estimated for c in calls)  # usage came from the server
    assert client.ledger.calls == 10
    assert client.ledger.prompt_tokens == sum(c.prompt_tokens for c in calls)
    assert client.ledger.completion_tokens == sum(c.completion_tokens for c in calls)
    # Updates carry the neighbour's reply: longer prompts than round 0's answers.
    first = [c.prompt_tokens for c in calls if c.kind == "answer"]
    later = [c.prompt_tokens for c in calls if c.kind == "update"]
    assert later
    assert min(later) > min(first)


def test_swarm_command_writes_a_cost_card_equal_to_the_traces(openai_server: Any, tmp_path) -> None:
    from orchestra_rl.cli import main

    out = tmp_path / "swarm"
    argv = ["swarm", "--base-url", openai_server.base_url, "--model", openai_server.model,
            "--agents", "2", "--budget", "4", "--rounds", "3", "--policy", "complete",
            "--task", "facts-mc", "--instances", "2", "--max-new-tokens", "8",
            "--temperature", "0", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    card = json.loads((out / "cost_card.json").read_text())
    assert len(episodes) == 2
    assert all(e["calls"] <= 4 for e in episodes)
    # The card counts every request: the episodes' and the pre-flight check's (one request
    # at temperature 0, so no sampling check).
    pre = summary["server"]
    assert pre["preflight_calls"] == 1
    assert summary["calls"] == sum(e["calls"] for e in episodes) == card["calls"] - 1
    assert summary["estimated_calls"] == 0
    assert (
        card["prompt_tokens"] - pre["preflight_prompt_tokens"]
        == summary["prompt_tokens"]
        == sum(c["prompt_tokens"] for e in episodes for c in e["calls_trace"])
    )
    assert (
        card["completion_tokens"] - pre["preflight_completion_tokens"]
        == summary["completion_tokens"]
    )
    assert card["by_model"][openai_server.model]["calls"] == card["calls"]


def test_swarm_command_refuses_a_budget_below_n_and_a_dead_server(tmp_path, capsys) -> None:
    from orchestra_rl.cli import main

    base = ["swarm", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--instances", "1",
            "--timeout", "2", "--out", str(tmp_path / "o")]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main([*base, "--agents", "4", "--budget", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "budget 3 is below the number of agents 4" in err[0]
    # A server nobody answers at: one line and a non-zero exit (was: exit 0, "accuracy 0.000").
    with pytest.raises(SystemExit) as exc:
        main([*base, "--agents", "2", "--budget", "2"])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "cannot reach" in err[0]
    assert "127.0.0.1:9" in err[0]
    assert not (tmp_path / "o" / "summary.json").exists()


def _refusal(argv: list[str], capsys: Any) -> str:
    from orchestra_rl.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("orchestra: error:")
    return err[0]


def _swarm_argv(server: Any, out: Path, *extra: str) -> list[str]:
    return ["swarm", "--base-url", server.base_url, "--model", server.model, "--agents", "2",
            "--instances", "2", "--max-new-tokens", "8", "--timeout", "60", "--out", str(out),
            *extra]  # fmt: skip


def test_served_failures_are_one_line(openai_server: Any, tmp_path: Path, capsys: Any) -> None:
    """A model the server does not serve, a server that ignores temperature (the core's
    transformers serve fixture has no do_sample in its generation config), a prompt over the
    model's context: one line each, a non-zero exit, no summary written."""
    out = tmp_path / "o"
    wrong = _swarm_argv(openai_server, out, "--temperature", "0")
    wrong[wrong.index("--model") + 1] = "no-such-model"
    line = _refusal(wrong, capsys)
    assert "no-such-model" in line
    line = _refusal(_swarm_argv(openai_server, out, "--temperature", "1.0"), capsys)
    assert "were identical" in line
    assert "ignores temperature" in line
    # The served micro model states SERVED_CONTEXT positions (its config.json, read from the
    # served folder): a reply that would fill them is refused before any call.
    line = _refusal(_swarm_argv(openai_server, out, "--temperature", "0",
                                "--max-new-tokens", str(SERVED_CONTEXT)), capsys)  # fmt: skip
    assert f"context of {SERVED_CONTEXT} tokens" in line
    line = _refusal(_swarm_argv(openai_server, out, "--temperature", "0",
                                "--context-length", "40"), capsys)  # fmt: skip
    assert "context of 40 tokens" in line
    assert not (out / "summary.json").exists()


@pytest.mark.slow  # a second transformers serve: about a minute to start on a busy CPU
def test_a_server_that_samples_passes_the_check(
    openai_sampling_server: Any, tmp_path: Path
) -> None:
    from orchestra_rl.cli import main

    out = tmp_path / "o"
    assert main(_swarm_argv(openai_sampling_server, out, "--temperature", "1.0")) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "distinct answers" in summary["server"]["sampling"]
    assert summary["server"]["preflight_calls"] == 1 + 4  # the request, then 4 samples


def test_a_learned_policy_is_trained_saved_and_run_on_served_seats(
    openai_server: Any, tmp_path: Path, capsys: Any
) -> None:
    """``orchestra train`` (scripted agents, seconds) saves a policy; ``swarm --policy
    learned:DIR`` runs it on served seats (temperature 0: no samples needed), held to 95% of
    the budget."""
    from orchestra_rl.cli import main

    policy = tmp_path / "policy"
    assert main(["train", "--out", str(policy), "--agents", "2", "--task", "addition-plain",
                 "--instances", "8", "--iterations", "2", "--batch", "4"]) == 0  # fmt: skip
    assert (policy / "policy.safetensors").is_file()
    assert json.loads((policy / "policy.json").read_text())["spend_floor"] == 0.95
    out = tmp_path / "o"
    argv = _swarm_argv(openai_server, out, "--temperature", "0", "--policy",
                       f"learned:{policy}", "--budget", "6", "--rounds", "4")  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "orchestra_rl"
    episodes = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert all(e["calls"] >= 0.95 * 6 for e in episodes)
    # A policy trained on another task kind is refused before any call.
    line = _refusal([*argv, "--task", "facts-mc"], capsys)
    assert "addition-plain" in line


def test_swarm_prepares_out_before_any_call(tmp_path, capsys) -> None:
    """--out goes through the core's preparation: a dangling link was a FileExistsError
    traceback from mkdir; now it is one line, before the server is contacted."""
    from orchestra_rl.cli import main

    dangling = tmp_path / "gone"
    dangling.symlink_to(tmp_path / "deleted")
    argv = ["swarm", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--instances", "1",
            "--agents", "2", "--budget", "2", "--timeout", "2", "--out", str(dangling)]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "dangling symbolic link" in err[0]


@pytest.mark.slow  # a sampling transformers serve and a few dozen served calls
def test_demo_real_runs_on_a_tiny_budget(
    openai_sampling_server: Any, tmp_path: Path, monkeypatch
) -> None:
    """``demo --real --quick`` end to end on the micro model (instead of SmolLM2, whose server
    takes minutes to start): the premise and method rows at every N, the claims, the server."""
    from contextlib import contextmanager

    from orchestra_rl import real
    from orchestra_rl.cli import main

    @contextmanager
    def served(workdir: Path):
        yield openai_sampling_server.base_url, openai_sampling_server.model, "transformers serve"

    monkeypatch.setattr(real, "served_smollm2", served)
    out = tmp_path / "real"
    assert main(["demo", "--real", "--quick", "--seeds", "0,1", "--no-progress",
                 "--out", str(out)]) == 0  # fmt: skip
    results = json.loads((out / "results.json").read_text())
    splits = {r["split"] for r in results["rows"]}
    assert {"real N=2", "real N=4"} <= splits
    found = {(r["system"], r["metric"], r["split"]) for r in results["rows"]}
    assert ("orchestra_rl", "accuracy", "real N=4") in found
    assert ("random_broadcast", "net_right_after_reading", "real N=2") in found
    ids = {c["id"] for c in results["claims"]}
    assert "real_premise_broadcast_below_single_shot" in ids
    assert results["manifest"]["config"]["real"] is True
