"""A real server in the loop: prover and judge served by ``transformers serve`` on 127.0.0.1.

The served model is the core's micro tiny Llama with random weights: its proofs are noise and
its judge answers carry no ``\\boxed`` verdict, so this pins the plumbing: every request goes
over HTTP (counted in the cost ledger with the server's token counts), unparseable judge answers
become counted judge failures and never scores, and a recorded run replays without the server.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("httpx")
pytest.importorskip("torch")

from proofrank.judges import LLMJudge
from proofrank.leaderboard import evaluate
from proofrank.problems import shipped_problems
from proofrank.provers import ScriptedProver

from paperstack.llm import OpenAIChat, Recorder

pytestmark = pytest.mark.serve

PROBLEMS = shipped_problems().split("test")
FEW = PROBLEMS.subset(PROBLEMS.ids[:2])


def test_served_prover_and_judge_score_a_few_problems(openai_server: Any, tmp_path) -> None:
    prover = OpenAIChat(openai_server.base_url, openai_server.model, timeout=120)
    judge_model = OpenAIChat(openai_server.base_url, openai_server.model, timeout=120)
    judge = LLMJudge(judge_model, max_new_tokens=8)
    run = evaluate(prover, FEW, judge, samples=2, temperature=0.7, max_new_tokens=16,
                   adaptive=False, name="served")  # fmt: skip
    # 2 greedy + 2x2 sampled proofs went to the server (n is asked once per sample).
    assert prover.ledger.calls == 6
    assert prover.ledger.completion_tokens > 0
    # A random model's proofs are empty (incorrect, no judge asked) or noise, and the judge's
    # answers carry no verdict: one counted judge failure per question asked, never a score.
    assert judge.ledger.calls == judge_model.ledger.calls
    assert len(run.failures) == judge_model.ledger.calls
    assert {f.aspect for f in run.failures} <= {"correct"}
    assert set(run.values("correct").values()) <= {0.0}
    assert run.values("verbosity") == {}
    rows = {r.metric: r for r in run.rows()}
    assert rows["judge_failures"].k == len(run.failures)


def test_served_judge_of_real_proofs_is_recorded_and_replayed(openai_server: Any, tmp_path) -> None:
    judge_model = OpenAIChat(openai_server.base_url, openai_server.model, timeout=120)
    prover = ScriptedProver("elegant", FEW)
    cassette = tmp_path / "judge.jsonl"
    with Recorder(judge_model, cassette) as rec:
        judge = LLMJudge(rec, max_new_tokens=8)
        run = evaluate(prover, FEW, judge, samples=2, adaptive=False, name="elegant")
    # One correctness question per proof (2 greedy + 2x2 samples): the elegant prover's samples
    # repeat its greedy proof, so the cassette answers 4 of the 6 and only 2 go over HTTP.
    assert judge.ledger.calls == 6
    assert judge_model.ledger.calls == 2
    assert judge_model.ledger.prompt_tokens > 0
    assert len(run.failures) == 6
    assert all("boxed" in f.reason for f in run.failures)
    with Recorder(None, cassette, mode="replay") as rep:
        again = evaluate(prover, FEW, LLMJudge(rep, max_new_tokens=8), samples=2,
                         adaptive=False, name="elegant")  # fmt: skip
        assert rep.misses == 0
    assert [f.answer for f in again.failures] == [f.answer for f in run.failures]


def test_leaderboard_command_ranks_a_served_model(openai_server: Any, tmp_path) -> None:
    import json

    from proofrank.cli import main

    out = tmp_path / "board"
    argv = ["leaderboard", "--base-url", openai_server.base_url, "--prover", openai_server.model,
            "--judge-model", openai_server.model, "--limit", "2", "--samples", "2",
            "--max-new-tokens", "8", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["problems"] == 2
    assert board["measures"] == "authors"  # the default with a judge model
    assert {r["metric"] for r in board["rows"]} >= {"judge_failures"}
    card = json.loads((out / "cost_card.json").read_text())
    assert card["calls"] >= 2 + 2 * 2  # the prover's greedy and sampled proofs at least
    assert openai_server.model in card["by_model"]


def test_leaderboard_against_no_server_is_one_line(tmp_path, capsys) -> None:
    from proofrank.cli import main

    argv = ["leaderboard", "--base-url", "http://127.0.0.1:9/v1", "--prover", "m", "--limit", "1",
            "--timeout", "2", "--out", str(tmp_path / "o")]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "127.0.0.1:9" in err
