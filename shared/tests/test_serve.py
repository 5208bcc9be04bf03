"""OpenAIChat against a real OpenAI-compatible server: ``transformers serve`` on 127.0.0.1.

The server serves a tiny model trained for a few seconds (so its answers depend on the prompt)
from a local folder with the hub offline; the same model loaded locally is the reference.
What transformers serve does not support is pinned here too: ``n`` (the client asks once per
sample) and log-probabilities (a clear LogprobsUnsupportedError, no retries). And that it
ignores temperature for a model whose generation_config lacks ``do_sample``: the client's
start-up sampling check catches it.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")
pytest.importorskip("torch")

from paperstack.llm import (
    Completion,
    ContextOverflowError,
    LLMError,
    LogprobsUnsupportedError,
    OpenAIChat,
)

pytestmark = pytest.mark.serve


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from paperstack import tiny

    model, tokenizer = tiny.pretrained(tiny.QUICK_PRESET, ("addition",), steps=300, progress=False)
    path = tmp_path_factory.mktemp("served-addition")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def server(serve_model: Any, trained_dir: Path) -> Any:
    return serve_model(trained_dir)


@pytest.fixture(scope="module")
def local(trained_dir: Path) -> Any:
    from paperstack.llm import TransformersChat

    return TransformersChat.from_pretrained(str(trained_dir), device="cpu")


PROMPTS = [f"{a}+{b}=" for a, b in [(12, 7), (3, 45), (60, 21), (8, 8), (99, 1), (25, 52)]]


def test_batched_generate_equals_the_local_model(server: Any, local: Any) -> None:
    with OpenAIChat(server.base_url, server.model, concurrency=4) as chat:
        messages = [[{"role": "user", "content": p}] for p in PROMPTS]
        served = chat.generate(messages, max_new_tokens=6)
        raw = chat.generate(PROMPTS, max_new_tokens=6)
        ledger = chat.ledger.to_json()
    assert served == local.generate(messages, max_new_tokens=6)
    assert raw == local.generate(PROMPTS, max_new_tokens=6)
    assert len({s[0] for s in served}) > 1  # the answers depend on the prompt
    for sample in (served[0][0], raw[0][0]):
        assert isinstance(sample, Completion)
        assert sample.finish_reason in ("stop", "length")
        assert sample.prompt_tokens is not None
        assert sample.prompt_tokens > 0
        assert sample.completion_tokens is not None
        assert 0 < sample.completion_tokens <= 6
    assert ledger["calls"] == 2 * len(PROMPTS)
    assert ledger["failed"] == 0
    assert ledger["unmetered_calls"] == 0
    assert ledger["prompt_tokens"] == sum(c[0].prompt_tokens for c in served + raw)
    assert ledger["completion_tokens"] == sum(c[0].completion_tokens for c in served + raw)


def test_concurrent_callers_share_one_limit_and_agree(server: Any) -> None:
    chat = OpenAIChat(server.base_url, server.model, concurrency=3)
    results: dict[int, Any] = {}

    def call(k: int) -> None:
        results[k] = chat.generate(PROMPTS, max_new_tokens=5)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    chat.close()
    assert len(results) == 4
    assert all(r == results[0] for r in results.values())  # greedy: the same under load
    assert chat.ledger.calls == 4 * len(PROMPTS)


def test_n_samples_from_a_server_that_ignores_n(server: Any) -> None:
    with OpenAIChat(server.base_url, server.model) as chat:
        out = chat.generate(["12+7="], n=3, temperature=1.0, seed=11, max_new_tokens=5)
        again = chat.generate(["12+7="], n=3, temperature=1.0, seed=11, max_new_tokens=5)
    assert len(out[0]) == 3
    assert out == again  # seeded: reproducible


def test_stop_strings_are_cut(server: Any) -> None:
    with OpenAIChat(server.base_url, server.model) as chat:
        out = chat.generate(PROMPTS[:2], max_new_tokens=8, stop=["1"])
    assert all("1" not in s[0] for s in out)


def test_logprobs_are_unsupported_in_one_line_without_retries(server: Any) -> None:
    with OpenAIChat(server.base_url, server.model, max_retries=3) as chat:
        with pytest.raises(LogprobsUnsupportedError, match="no echoed prompt logprobs") as info:
            chat.logprobs(["12+7="], ["19"])
        assert "\n" not in str(info.value)
        assert chat.ledger.retries == 0


def test_a_prompt_over_the_context_is_one_line(server: Any) -> None:
    """transformers serve answers a prompt longer than the model's 512 positions with HTTP 200
    (an empty reply); the client reads the context from the served folder's config.json and
    refuses the answer in one line. Prompts that fit are untouched; a stated context wins; the
    check can be turned off."""
    long_prompt = "12+7=" * 150  # about 750 tokens of the toy tokenizer
    with OpenAIChat(server.base_url, server.model) as chat:
        length, source = chat.context_length()
        assert length == 512
        assert source.endswith("config.json (max_position_embeddings)")
        assert chat.generate(["12+7="], max_new_tokens=4)[0][0].prompt_tokens < 512
        with pytest.raises(ContextOverflowError) as info:
            chat.generate([long_prompt], max_new_tokens=4)
    line = str(info.value)
    assert "\n" not in line
    assert "context of 512 tokens" in line
    assert "max_position_embeddings" in line
    stated = OpenAIChat(server.base_url, server.model, context_length=8)
    with (
        stated,
        pytest.raises(ContextOverflowError, match=r"context of 8 tokens \(context_length\)"),
    ):
        stated.generate(["12+7=12+7="], max_new_tokens=4)
    with OpenAIChat(server.base_url, server.model, check_context=False) as chat:
        chat.generate([long_prompt], max_new_tokens=4)  # the caller opted out: no refusal


def test_an_unstated_context_is_not_checked(tmp_path: Path) -> None:
    """No /v1/models answer and a model name that is no local folder (a hosted API): unknown,
    so nothing is refused."""
    with OpenAIChat("http://127.0.0.1:9", "gpt-x", max_retries=0) as chat:
        assert chat.context_length() == (None, "unknown")
    with pytest.raises(LLMError, match="context_length >= 1"):
        OpenAIChat("http://127.0.0.1:9", "gpt-x", context_length=0)


def _random_model_dir(root: Path, *, do_sample: bool | None) -> Path:
    """A micro random Llama (its samples at temperature 1 are all over the vocabulary) saved
    with save_pretrained, its generation_config with or without ``do_sample``."""
    from paperstack import tiny

    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tiny.QUICK_PRESET, tokenizer, seed=0)
    if do_sample is not None:
        model.generation_config.do_sample = do_sample
    model.save_pretrained(root)
    tokenizer.save_pretrained(root)
    return root


@pytest.mark.parametrize("do_sample", [None, True], ids=["no-do_sample", "do_sample"])
def test_sampling_check_against_transformers_serve(
    serve_model: Any, tmp_path_factory: pytest.TempPathFactory, do_sample: bool | None
) -> None:
    path = _random_model_dir(tmp_path_factory.mktemp("sampling"), do_sample=do_sample)
    saved = json.loads((path / "generation_config.json").read_text())
    assert saved.get("do_sample") is do_sample
    server = serve_model(path)
    with OpenAIChat(server.base_url, server.model) as chat:
        assert chat.samples_differ is None
        assert chat.sampling_report is None
        differ = chat.check_sampling()
        calls = chat.ledger.calls
        assert calls == 4
        assert chat.check_sampling() is differ  # cached: no more requests
        assert chat.ledger.calls == calls
        report = chat.sampling_report
        assert report is not None
        assert report.startswith(f"{server.base_url} model {server.model}: 4 samples at ")
        if do_sample:
            assert differ is True
            assert chat.samples_differ is True
            assert "distinct answers" in report
            chat.require_sampling("self-consistency")  # no error
        else:
            # transformers serve decodes greedily whatever the request's temperature says
            assert differ is False
            assert chat.samples_differ is False
            with pytest.raises(LLMError) as info:
                chat.require_sampling("self-consistency")
            assert str(info.value) == (
                f"{server.base_url} model {server.model}: 4 samples at temperature 1.0 were "
                "identical; the server ignores temperature (transformers serve does when the "
                "model's generation_config lacks do_sample): self-consistency needs distinct "
                "samples"
            )


def test_a_server_killed_mid_run_fails_in_one_line_without_hanging(
    served_model_dir: Path, tmp_path: Path
) -> None:
    """A server of its own (the session's stays up), SIGKILLed while requests are in flight:
    the caller gets one BackendUnreachableError line, soon, and the next call too."""
    import os
    import signal
    import time

    from paperstack.llm import BackendUnreachableError
    from paperstack.llm.serve import TransformersServer
    from paperstack.testing import _need_serving

    _need_serving()  # skipped without transformers[serving], failed where a session requires it
    prompts = [f"{k}+{k}=" for k in range(12)]
    with TransformersServer(served_model_dir, log_path=tmp_path / "server.log") as server:
        client = OpenAIChat(
            server.base_url, server.model, timeout=60, max_retries=2, backoff=0.1, concurrency=2
        )
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["result"] = client.generate(prompts, max_new_tokens=200)
            except BaseException as exc:
                outcome["error"] = exc

        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        deadline = time.monotonic() + 60
        while client.ledger.calls < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.is_alive(), f"every request ended before the kill: {outcome}"
        assert server.pid is not None
        os.killpg(server.pid, signal.SIGKILL)
        started = time.monotonic()
        worker.join(timeout=60)
        assert not worker.is_alive(), "the client hangs on a dead server"
        assert time.monotonic() - started < 30
    error = outcome.get("error")
    assert isinstance(error, BackendUnreachableError), f"expected one, got {outcome}"
    assert server.base_url in str(error)
    assert "\n" not in str(error)
    assert client.ledger.failed >= 1
    with pytest.raises(BackendUnreachableError, match="cannot reach") as info:
        client.generate(prompts[:1], max_new_tokens=2)
    assert "\n" not in str(info.value)
    client.close()


def test_sampling_copy_links_the_weights_and_sets_do_sample(tmp_path: Path) -> None:
    from paperstack.llm.serve import sampling_copy

    src = tmp_path / "model"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "llama"}')
    (src / "model.safetensors").write_bytes(b"weights")
    (src / "generation_config.json").write_text('{"eos_token_id": 2, "do_sample": false}')
    out = sampling_copy(src, tmp_path / "copy")
    assert json.loads((out / "generation_config.json").read_text()) == {
        "eos_token_id": 2,
        "do_sample": True,
    }
    assert (out / "model.safetensors").is_symlink()
    assert (out / "model.safetensors").read_bytes() == b"weights"
    assert json.loads((src / "generation_config.json").read_text())["do_sample"] is False
    assert sampling_copy(src, tmp_path / "copy") == out  # again: the same folder, no error


def test_vllm_server_runs_the_interpreter_it_is_given(tmp_path: Path, monkeypatch: Any) -> None:
    from paperstack.llm.serve import VLLMServer, vllm_python

    monkeypatch.setenv("PAPERSTACK_VLLM_PYTHON", "/opt/vllm-env/bin/python")
    assert vllm_python() == "/opt/vllm-env/bin/python"
    server = VLLMServer(tmp_path, python=sys.executable, log_path=tmp_path / "log")
    command = server.command()
    assert command[0] == sys.executable
    assert command[command.index("serve") + 1] == str(tmp_path)
    # The CPU build prefills whole prompts (seeded requests killed its engine otherwise).
    server.cpu_build = True
    cpu = server.command()
    assert cpu[cpu.index("--max-num-batched-tokens") + 1] == str(server.max_model_len)
    assert "--no-enable-chunked-prefill" in cpu
    server.cpu_build = False
    assert "--no-enable-chunked-prefill" not in server.command()
    own = VLLMServer(tmp_path, python=sys.executable, extra_args=["--enable-chunked-prefill"])
    own.cpu_build = True
    assert "--no-enable-chunked-prefill" not in own.command()


def test_served_transformers_engine_samples(
    serve_model: Any, served_model_dir: Path, tmp_path: Path
) -> None:
    """``served(..., engine="transformers")``: transformers serve of a sampling copy, so a
    request's temperature is honoured (the micro model itself decodes greedily). ``serve_model``
    is requested for its skip (or failure) where transformers' serving extra is missing."""
    from paperstack.llm.serve import served

    with served(served_model_dir, tmp_path, engine="transformers", timeout=300) as server:
        assert server.name == "transformers serve"
        with OpenAIChat(server.base_url, server.model) as chat:
            assert chat.check_sampling() is True
    assert (tmp_path / "serve.log").is_file()
    bad_engine = pytest.raises(LLMError, match="engine must be auto, vllm or transformers")
    with bad_engine, served(served_model_dir, tmp_path, engine="tgi"):
        pass


def test_served_reuses_a_running_server_named_in_the_environment(
    server: Any, served_model_dir: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """``$PAPERSTACK_SERVED_BASE_URL``: ``served`` starts nothing and hands back the running
    server (several real arms then share one engine); a dead URL is one line."""
    from paperstack.llm.base import BackendUnreachableError
    from paperstack.llm.serve import RunningServer, served

    monkeypatch.setenv("PAPERSTACK_SERVED_BASE_URL", server.base_url.removesuffix("/v1"))
    with served(served_model_dir, tmp_path / "unused") as running:
        assert isinstance(running, RunningServer)
        assert running.base_url == server.base_url
        assert running.model == server.model
        assert running.name.endswith("(running)")
        with OpenAIChat(running.base_url, running.model) as chat:
            assert len(chat.generate(["12+7="], max_new_tokens=4)) == 1
    assert not (tmp_path / "unused" / "serve.log").exists()
    # One model served: it is the one, whatever its id (vLLM's --served-model-name).
    assert RunningServer(server.base_url, expect="elsewhere").model == server.model
    monkeypatch.setenv("PAPERSTACK_SERVED_BASE_URL", "http://127.0.0.1:9/v1")
    with (
        pytest.raises(BackendUnreachableError, match=r"PAPERSTACK_SERVED_BASE_URL=.*no model list"),
        served(served_model_dir, tmp_path),
    ):
        pass
