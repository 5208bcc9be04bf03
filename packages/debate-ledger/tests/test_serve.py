"""The runner against a real OpenAI-compatible server: ``transformers serve`` on 127.0.0.1
serving a micro tiny model (the core's ``openai_server`` fixture), through ``OpenAIChat``.

A debate run by the CLI is killed (SIGKILL) mid-run and resumed by rerunning the same command;
the ledger equals the uninterrupted run's, row for row. The server's token counts and finish
reasons are in the rows and the cost card counts every request. Against a server that always
answers 500, the one retry layer is the client's: the run ends with one line after
``--max-retries`` retries of one request, not one per pending call (a dead port is the
conformance suite's check).
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from debate_ledger.cli import main
from debate_ledger.schemas import read_ledger

pytest.importorskip("httpx")
pytest.importorskip("torch")

pytestmark = pytest.mark.serve


def _questions(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    qs = [
        {"id": f"q{i}", "text": f"Which number is {i}?", "options": [str(i), "x", "y", "z"],
         "gold": "A"}
        for i in range(4)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(q) + "\n" for q in qs))
    return path


def _argv(server: Any, ledger: Path, questions: Path) -> list[str]:
    return [
        "run", "--ledger", str(ledger), "--family", "micro", "--model", server.model,
        "--base-url", server.base_url, "--questions", str(questions), "--agents", "2",
        "--rounds", "1", "--seeds", "0,1", "--temperature", "1.0", "--max-new-tokens", "8",
        "--concurrency", "1", "--no-progress",
    ]  # fmt: skip


def _content(path: Path) -> list[dict[str, Any]]:
    return sorted(
        (r.model_dump(exclude={"latency_s"}) for r in read_ledger(path)),
        key=lambda d: (d["debate_id"], d["agent"], d["round"], d["sample"]),
    )


def test_a_server_that_ignores_temperature_is_refused_in_one_line(openai_server, tmp_path, capsys):
    """The default micro model has no do_sample in its generation_config, so transformers serve
    decodes greedily at any temperature: every agent and resample would be one answer."""
    ledger = tmp_path / "l.jsonl"
    with pytest.raises(SystemExit) as exc:
        main(_argv(openai_server, ledger, _questions(tmp_path)))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "the server ignores temperature" in err[0]
    assert "--temperature 1 with 2 agents and 1 resamples needs distinct samples" in err[0]
    assert not ledger.exists()
    # greedy on purpose (temperature 0) is not refused
    argv = _argv(openai_server, ledger, _questions(tmp_path))
    argv[argv.index("--temperature") + 1] = "0"
    assert main(argv) == 0


def test_killed_and_resumed_run_equals_the_uninterrupted_run(
    openai_sampling_server, tmp_path, capsys
):
    openai_server = openai_sampling_server  # agents at temperature 1 need a server that samples
    questions = _questions(tmp_path)
    clean = tmp_path / "clean" / "ledger.jsonl"
    assert main(_argv(openai_server, clean, questions)) == 0
    rows = read_ledger(clean)
    assert len(rows) == 4 * 2 * 2 * (2 + 1)  # questions x seeds x agents x (rounds + resamples)
    assert {r.tokens_source for r in rows} == {"server"}
    assert all(r.tokens_in > 0 and r.finish_reason in ("stop", "length") for r in rows)
    card = json.loads((clean.parent / "cost_card.json").read_text())
    # every call is counted: the rows' and the four of the start-up sampling check
    assert card["sessions"][0]["calls"] == len(rows) + 4
    assert card["totals"]["prompt_tokens"] > sum(r.tokens_in for r in rows)
    assert card["totals"]["completion_tokens"] > sum(r.tokens_out for r in rows)

    crashed = tmp_path / "crashed" / "ledger.jsonl"
    crashed.parent.mkdir()
    script = "import sys; from debate_ledger.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", script, *_argv(openai_server, crashed,
                                                                  questions)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if crashed.is_file() and crashed.read_text().count("\n") >= 10:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = crashed.read_text().count("\n")
    assert 10 <= kept < len(rows), "the run was not killed mid-way"
    assert main(_argv(openai_server, crashed, questions)) == 0  # the same command resumes
    assert _content(crashed) == _content(clean)
    out = capsys.readouterr().out
    assert f"{len(rows) - kept} new" in out or f"{len(rows) - kept + 1} new" in out


class _Always500(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self) -> None:
        type(self).hits += 1
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": {"message": "boom"}}')

    def log_message(self, *args: Any) -> None:
        pass


def test_a_failing_server_is_asked_once_per_retry_not_once_per_pending_call(tmp_path, capsys):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Always500)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        ledger = tmp_path / "l.jsonl"
        argv = ["run", "--ledger", str(ledger), "--family", "f", "--model", "m", "--base-url",
                url, "--questions", str(_questions(tmp_path)), "--concurrency", "4",
                "--max-retries", "2", "--no-progress"]  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main(argv)
    finally:
        server.shutdown()
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "HTTP 500" in err[0]
    assert "rerun the same command" in err[0]
    # four calls were in flight when the first failed; each got its 1 + 2 attempts, no more
    assert 3 <= _Always500.hits <= 4 * 3
    card = json.loads((tmp_path / "cost_card.json").read_text())
    assert card["sessions"][0]["failed"] >= 1
    assert card["sessions"][0]["completed"] is False


def test_a_prompt_over_the_served_context_is_one_line(openai_server, tmp_path, capsys):
    """The served test model states 4,096 positions; a question of about 6,000 characters (its
    tokenizer is character-level) does not fit: one line naming the context, exit 2, where the
    client used to take whatever the server made of it."""
    path = tmp_path / "long.jsonl"
    q = {"id": "long", "text": "Which? " + "x" * 6000, "options": ["a", "b"], "gold": "A"}
    path.write_text(json.dumps(q) + "\n")
    ledger = tmp_path / "l.jsonl"
    argv = ["run", "--ledger", str(ledger), "--family", "f", "--model", openai_server.model,
            "--base-url", openai_server.base_url, "--questions", str(path), "--agents", "2",
            "--rounds", "1", "--resamples", "0", "--temperature", "0", "--max-new-tokens", "8",
            "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "context of 4096 tokens" in err[0]
    assert not ledger.exists() or ledger.read_text() == ""
