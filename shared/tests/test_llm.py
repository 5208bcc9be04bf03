"""Tests for paperstack.llm: the protocol, the transformers and HTTP backends, cassettes, rules.

The transformers backend runs a tiny random-init Llama with a character-level tokenizer built
here (no hub); the HTTP backend talks to a real ThreadingHTTPServer on 127.0.0.1 started by the
test, which can be told to fail, stall or refuse.
"""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from paperstack.errors import PaperstackError
from paperstack.llm import (
    BackendHTTPError,
    BackendTimeoutError,
    BackendUnreachableError,
    CassetteError,
    ChatModel,
    GenerationConfig,
    LLMError,
    LogprobsUnsupportedError,
    Recorder,
    ReplayMissError,
    RuleAgent,
    generate_one,
)

# --------------------------------------------------------------------------- fakes


class EchoAgent(RuleAgent):
    """Replies with the last message reversed, plus a seeded random digit."""

    def respond(self, messages: list[dict[str, Any]]) -> str:
        digit = self.rng(messages).randint(0, 9)
        return f"{messages[-1]['content'][::-1]}|{digit}"


class CountingModel:
    """A ChatModel that counts calls and samples (fake) randomness, to test the Recorder."""

    name = "counting"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self._draw = 0

    def generate(self, prompts, *, n=1, temperature=0.0, seed=None, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(("generate", len(prompts)))
        out = []
        for p in prompts:
            text = p if isinstance(p, str) else p[-1]["content"]
            samples = []
            for _ in range(n):
                self._draw += 1
                tag = self._draw if temperature > 0 and seed is None else 0
                samples.append(f"{text}#{tag}")
            out.append(samples)
        return out

    def logprobs(self, prompts, continuations):  # type: ignore[no-untyped-def]
        self.calls.append(("logprobs", len(prompts)))
        return [
            np.array([-0.1 * (k + 1) for k in range(len(c))] + [], dtype=np.float32)
            for c in continuations
        ]


# --------------------------------------------------------------------------- import hygiene


def test_import_pulls_no_heavy_library() -> None:
    code = (
        "import sys, paperstack.llm; "
        "bad = [m for m in ('torch', 'transformers', 'httpx') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_generation_config_validates() -> None:
    assert GenerationConfig(stop=["a"]).stop == ("a",)
    assert GenerationConfig(temperature=0.7).stochastic
    assert not GenerationConfig(temperature=0.7, seed=1).stochastic
    for bad in ({"n": 0}, {"temperature": -1.0}, {"top_p": 0.0}, {"stop": [""]}):
        with pytest.raises(LLMError):
            GenerationConfig(**bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- rule agents


def test_rule_agent_is_a_chat_model_and_deterministic() -> None:
    agent = EchoAgent(seed=3)
    assert isinstance(agent, ChatModel)
    assert agent.name == "EchoAgent"
    msgs = [{"role": "user", "content": "abc"}]
    first = agent.generate([msgs, "xyz"], n=2)
    assert first == agent.generate([msgs, "xyz"], n=2)
    assert first[0][0].startswith("cba|")
    assert first[0][0] == first[0][1]
    assert first[1][0].startswith("zyx|")  # a string prompt arrives as one user message
    assert generate_one(agent, "xyz") == first[1][0]
    assert agent.generate(["xyz"], stop=["y"]) == [["z"]]


def test_rule_agent_samples_can_differ_and_see_the_call_seed() -> None:
    class Dice(EchoAgent):
        def sample(self, messages: list[dict[str, Any]], index: int, seed: int | None) -> str:
            return f"{self.respond(messages)}#{index}@{seed}"

    agent = Dice(seed=1)
    out = agent.generate(["ab"], n=3, seed=7, stop=["@"])
    assert out == [[f"{agent.respond([{'role': 'user', 'content': 'ab'}])}#{j}" for j in range(3)]]
    assert agent.generate(["ab"], n=1, seed=8)[0][0].endswith("#0@8")
    assert agent.generate(["ab"], n=2, seed=7) == agent.generate(["ab"], n=2, seed=7)


def test_rule_agent_refuses_logprobs() -> None:
    with pytest.raises(LogprobsUnsupportedError, match="not supported by rule-based agents"):
        EchoAgent().logprobs(["a"], ["b"])


def test_bad_prompts_get_one_line_errors() -> None:
    agent = EchoAgent()
    with pytest.raises(LLMError, match="list of prompts"):
        agent.generate("abc")  # type: ignore[arg-type]
    with pytest.raises(LLMError, match=r"prompts\[0\]\[0\]"):
        agent.generate([[{"content": "no role"}]])
    with pytest.raises(LLMError, match="one continuation per prompt"):
        agent.logprobs(["a", "b"], ["c"])


# --------------------------------------------------------------------------- recorder


def test_recorder_replays_with_no_model(tmp_path: Path) -> None:
    cassette = tmp_path / "calls.jsonl"
    inner = CountingModel()
    with Recorder(inner, cassette, mode="record") as rec:
        assert isinstance(rec, ChatModel)
        live = rec.generate(["a", [{"role": "user", "content": "b"}]], max_new_tokens=5)
        scores = rec.logprobs(["p", "q"], ["xyz", "uv"])
    assert len(cassette.read_text().splitlines()) == 4

    replay = Recorder(None, cassette, mode="replay")
    assert replay.name == "counting"  # read from the cassette
    assert replay.generate(["a", [{"role": "user", "content": "b"}]], max_new_tokens=5) == live
    again = replay.logprobs(["q", "p"], ["uv", "xyz"])  # another order and batching
    np.testing.assert_array_equal(again[0], scores[1])
    assert again[1].dtype == np.float32
    assert np.array_equal(again[1], scores[0])
    assert replay.hits == 4
    assert replay.misses == 0


def test_replay_miss_names_cassette_and_hash(tmp_path: Path) -> None:
    cassette = tmp_path / "calls.jsonl"
    with Recorder(CountingModel(), cassette) as rec:
        rec.generate(["a"])
    replay = Recorder(None, cassette, mode="replay")
    with pytest.raises(ReplayMissError) as info:
        replay.generate(["a"], max_new_tokens=7)  # other parameters: another request
    message = str(info.value)
    assert str(cassette) in message
    assert "\n" not in message
    assert any(len(word) == 64 for word in message.split())  # the full sha256 key


def test_auto_mode_asks_only_for_missing_prompts(tmp_path: Path) -> None:
    cassette = tmp_path / "calls.jsonl"
    inner = CountingModel()
    with Recorder(inner, cassette) as rec:
        rec.generate(["a", "b"])
        assert rec.generate(["b", "c", "a"]) == [["b#0"], ["c#0"], ["a#0"]]
    assert inner.calls == [("generate", 2), ("generate", 1)]
    assert (rec.hits, rec.misses) == (2, 3)


def test_unseeded_sampling_replays_the_same_sequence(tmp_path: Path) -> None:
    cassette = tmp_path / "calls.jsonl"
    with Recorder(CountingModel(), cassette) as rec:
        live = [rec.generate(["a", "a"], temperature=1.0) for _ in range(2)]
    assert live == [[["a#1"], ["a#2"]], [["a#3"], ["a#4"]]]  # distinct samples, not one cached
    replay = Recorder(None, cassette, mode="replay")
    assert [replay.generate(["a", "a"], temperature=1.0) for _ in range(2)] == live
    with pytest.raises(ReplayMissError):
        replay.generate(["a"], temperature=1.0)  # a fifth sample was never recorded


def test_torn_last_line_is_dropped_when_recording_resumes(tmp_path: Path) -> None:
    cassette = tmp_path / "calls.jsonl"
    with Recorder(CountingModel(), cassette) as rec:
        rec.generate(["a", "b"])
    with cassette.open("ab") as fh:
        fh.write(b'{"key": "dead", "resp')  # the run was killed mid-line
    inner = CountingModel()
    with Recorder(inner, cassette) as rec:
        assert rec.generate(["a", "c"]) == [["a#0"], ["c#0"]]
    assert inner.calls == [("generate", 1)]
    lines = cassette.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert all(json.loads(line) for line in lines[:-1])
    assert len(lines) - 1 == 3


def test_corrupt_cassette_and_bad_modes(tmp_path: Path) -> None:
    cassette = tmp_path / "calls.jsonl"
    cassette.write_text('{"key": "a", "response": []}\nnot json\n{"key": "b", "response": []}\n')
    with pytest.raises(CassetteError, match="line 2"):
        Recorder(CountingModel(), cassette)
    with pytest.raises(CassetteError, match="no such cassette"):
        Recorder(None, tmp_path / "missing.jsonl", mode="replay")
    with pytest.raises(LLMError, match="needs a model"):
        Recorder(None, tmp_path / "x.jsonl", mode="record")
    with pytest.raises(LLMError, match="mode"):
        Recorder(None, tmp_path / "x.jsonl", mode="rewind")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- transformers


def _local_tiny(torch: Any, transformers: Any) -> tuple[Any, Any]:
    """Fallback when :mod:`paperstack.tiny` is unavailable: a char-level tokenizer built with
    ``tokenizers`` and a 2-layer random Llama."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    specials = ["<pad>", "<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>", "<|system|>"]
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789 .,:;!?+-=*/()'\n")
    vocab = {token: i for i, token in enumerate(specials + chars)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()
    template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        additional_special_tokens=specials[4:],
        chat_template=template,
    )
    config = transformers.LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config), tokenizer


@pytest.fixture(scope="module")
def tiny_chat() -> Iterator[Any]:
    """The toy world's ``micro`` random Llama and its char-level tokenizer with chat template.

    torch runs it on one thread: a model this small gains nothing from more, and on a shared
    2-core runner OpenMP threads spinning against other processes made calls 100x slower.
    """
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    from paperstack.llm import TransformersChat

    try:
        from paperstack import tiny
    except ImportError:
        model, tokenizer = _local_tiny(torch, transformers)
    else:
        tokenizer = tiny.build_tokenizer()
        model = tiny.build_model("micro", tokenizer, seed=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield TransformersChat(model, tokenizer, batch_size=2, name="tiny-llama")
    finally:
        torch.set_num_threads(threads)


def _naive_logprobs(chat: Any, prompt: Any, continuation: str) -> np.ndarray:
    """Reference: one unpadded forward pass and a Python loop over the continuation tokens."""
    import torch

    p = chat._prompt_ids(prompt)
    c = chat.tokenizer(continuation, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = chat.model(input_ids=torch.tensor([p + c])).logits[0]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return np.array([logp[len(p) - 1 + k, tok].item() for k, tok in enumerate(c)])


def test_transformers_logprobs_match_unbatched_reference(tiny_chat: Any) -> None:
    prompts: list[Any] = [
        "abc",
        [{"role": "user", "content": "what is 2+2?"}],
        "a much longer prompt that forces padding",
        "x",
    ]
    continuations = ["de", " 4", "!", "yz yz yz yz"]
    got = tiny_chat.logprobs(prompts, continuations)
    for prompt, cont, values in zip(prompts, continuations, got, strict=True):
        assert values.dtype == np.float32
        assert values.shape == (len(cont),)
        assert np.all(values <= 0)
        np.testing.assert_allclose(values, _naive_logprobs(tiny_chat, prompt, cont), atol=1e-5)
    assert tiny_chat.logprobs(["abc"], [""])[0].shape == (0,)


def test_transformers_batched_generation_matches_single(tiny_chat: Any) -> None:
    prompts: list[Any] = ["abc", "hello world, again", [{"role": "user", "content": "hi"}]]
    batched = tiny_chat.generate(prompts, max_new_tokens=6)
    single = [tiny_chat.generate([p], max_new_tokens=6)[0] for p in prompts]
    assert batched == single  # left padding does not change greedy decoding
    assert all(len(samples) == 1 for samples in batched)


def test_transformers_seed_is_honoured(tiny_chat: Any) -> None:
    kwargs: dict[str, Any] = {"max_new_tokens": 12, "temperature": 1.0, "n": 3}
    a = tiny_chat.generate(["abc", "de"], seed=1, **kwargs)
    assert a == tiny_chat.generate(["abc", "de"], seed=1, **kwargs)
    assert a != tiny_chat.generate(["abc", "de"], seed=2, **kwargs)
    assert len(a) == 2
    assert all(len(s) == 3 for s in a)
    assert len(set(a[0])) > 1  # the n samples differ from one another


def test_transformers_stop_strings_are_cut(tiny_chat: Any) -> None:
    full = tiny_chat.generate(["abc"], max_new_tokens=12)[0][0]
    visible = [ch for ch in full if ch.strip()]
    assert visible, "the tiny model produced only whitespace; pick another prompt"
    stop = visible[len(visible) // 2]
    cut = tiny_chat.generate(["abc"], max_new_tokens=12, stop=[stop])[0][0]
    assert cut == full[: full.index(stop)]


def test_transformers_without_chat_template_falls_back_or_refuses(tiny_chat: Any) -> None:
    from paperstack.llm import TransformersChat, fallback_chat_prompt

    chat = [{"role": "user", "content": "hi"}]
    template = tiny_chat.tokenizer.chat_template
    try:
        tiny_chat.tokenizer.chat_template = None
        fallback = tiny_chat.generate([chat], max_new_tokens=2)
        assert fallback == tiny_chat.generate([fallback_chat_prompt(chat)], max_new_tokens=2)
        tiny_chat.chat_template = "require"
        with pytest.raises(LLMError, match="no chat template") as info:
            tiny_chat.generate([chat], max_new_tokens=2)
        assert "\n" not in str(info.value)
    finally:
        tiny_chat.tokenizer.chat_template = template
        tiny_chat.chat_template = "fallback"
    assert isinstance(tiny_chat, TransformersChat)
    with pytest.raises(LLMError, match="chat_template must be"):
        TransformersChat(tiny_chat.model, tiny_chat.tokenizer, chat_template="strict")  # type: ignore[arg-type]


# A base model as users have them: GPT-2 (Conv1D, learned positions: an IndexError past
# n_positions), a tokenizer with no pad token and no chat template.


@pytest.fixture(scope="module")
def gpt2_chat() -> Iterator[Any]:
    """A random 2-layer GPT-2 with 64 positions and the toy world's char tokenizer stripped of
    its pad token and chat template."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from paperstack import tiny
    from paperstack.llm import TransformersChat

    tokenizer = tiny.build_tokenizer()
    tokenizer.pad_token = None
    tokenizer.chat_template = None
    config = transformers.GPT2Config(
        vocab_size=len(tokenizer), n_positions=64, n_embd=32, n_layer=2, n_head=4,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield TransformersChat(model, tokenizer, batch_size=2, name="tiny-gpt2")
    finally:
        torch.set_num_threads(threads)


def test_fallback_chat_prompt_is_a_role_prefixed_transcript() -> None:
    from paperstack.llm import fallback_chat_prompt

    messages = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ]
    assert fallback_chat_prompt(messages) == (
        "System: Be terse.\nUser: What is 2+2?\nAssistant: 4\nUser: And 3+3?\nAssistant:"
    )


def test_gpt2_without_template_or_pad_generates_from_messages_warning_once(
    gpt2_chat: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from paperstack.llm import fallback_chat_prompt

    assert gpt2_chat.tokenizer.pad_token is None
    assert gpt2_chat.pad_token_id == gpt2_chat.eos_token_id
    chats = [
        [{"role": "user", "content": "hi"}],
        [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "2+2?"}],
    ]
    with caplog.at_level("WARNING", logger="paperstack.llm"):
        first = gpt2_chat.generate(chats, max_new_tokens=4)
        again = gpt2_chat.generate(chats, max_new_tokens=4, temperature=1.0, n=2, seed=0)
        scores = gpt2_chat.logprobs([chats[0]], [" hello"])
    warnings = [r for r in caplog.records if "no chat template" in r.getMessage()]
    assert len(warnings) == 1, "the fallback is reported once per model, in one line"
    assert "tiny-gpt2" in warnings[0].getMessage()
    assert "\n" not in warnings[0].getMessage()
    texts = [fallback_chat_prompt(c) for c in chats]
    assert first == gpt2_chat.generate(texts, max_new_tokens=4)
    assert [len(s) for s in again] == [2, 2]
    assert scores[0].shape == (len(" hello"),)


def test_gpt2_require_chat_template_refuses_in_one_line(gpt2_chat: Any) -> None:
    from paperstack.llm import TransformersChat

    strict = TransformersChat(
        gpt2_chat.model, gpt2_chat.tokenizer, name="tiny-gpt2", chat_template="require"
    )
    with pytest.raises(LLMError, match="tokenizer of tiny-gpt2 has no chat template") as info:
        strict.generate([[{"role": "user", "content": "hi"}]], max_new_tokens=2)
    assert "\n" not in str(info.value)
    assert strict.generate(["hi"], max_new_tokens=2)[0][0] is not None  # strings still work


def test_max_positions_is_read_from_the_config(gpt2_chat: Any, tiny_chat: Any) -> None:
    from paperstack.llm import model_max_positions

    assert gpt2_chat.max_positions == 64
    assert model_max_positions(gpt2_chat.model) == (64, "n_positions")
    limit = tiny_chat.model.config.max_position_embeddings
    assert tiny_chat.max_positions == limit
    assert model_max_positions(tiny_chat.model.config) == (limit, "max_position_embeddings")
    assert model_max_positions(object()) is None


@pytest.mark.parametrize("which", ["gpt2", "llama"])
def test_prompt_beyond_the_positions_is_refused_before_generation(
    which: str, gpt2_chat: Any, tiny_chat: Any
) -> None:
    chat = gpt2_chat if which == "gpt2" else tiny_chat
    limit = chat.max_positions
    attr = "n_positions" if which == "gpt2" else "max_position_embeddings"
    fits = "a" * (limit - 4)  # one token per character
    assert len(chat._prompt_ids(fits)) == limit - 4
    out = chat.generate(["b", fits], max_new_tokens=4)  # exactly full: runs
    assert len(out) == 2
    calls: list[int] = []
    real = chat.model.generate
    chat.model.generate = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        with pytest.raises(LLMError) as info:
            chat.generate(["b", fits], max_new_tokens=5)
    finally:
        del chat.model.generate
    message = str(info.value)
    assert message == (
        f"{chat.name}: prompts[1] has {limit - 4} tokens and max_new_tokens is 5: {limit + 1} "
        f"exceeds the model's {limit} positions (config.{attr}); shorten the prompt or lower "
        "max_new_tokens"
    )
    assert calls == [], "refused before any generation"
    with pytest.raises(LLMError, match=rf"prompts\[0\] has {limit - 4} tokens and continuations"):
        chat.logprobs([fits], ["cdefg"])
    assert chat.logprobs([fits], ["cdef"])[0].shape == (4,)  # exactly full: scored


def test_prepare_tokenizer_pads_with_eos_or_says_what_is_missing() -> None:
    pytest.importorskip("transformers")
    from paperstack import tiny
    from paperstack.llm import prepare_tokenizer

    tokenizer = tiny.build_tokenizer()
    assert prepare_tokenizer(tokenizer, need_chat_template=True, name="m") is tokenizer
    assert tokenizer.pad_token == "<pad>"  # an existing pad token is kept

    tokenizer.pad_token = None
    tokenizer.chat_template = None
    prepare_tokenizer(tokenizer, need_chat_template=False, name="gpt2-like")
    assert tokenizer.pad_token == tokenizer.eos_token
    assert tokenizer.pad_token_id == tokenizer.eos_token_id
    with pytest.raises(LLMError, match="tokenizer of gpt2-like has no chat template") as info:
        prepare_tokenizer(tokenizer, need_chat_template=True, name="gpt2-like")
    assert "\n" not in str(info.value)

    tokenizer.pad_token = None
    tokenizer.eos_token = None
    with pytest.raises(LLMError, match="tokenizer of bare has neither a pad token nor an EOS"):
        prepare_tokenizer(tokenizer, need_chat_template=False, name="bare")


def test_fallback_template_renders_what_fallback_chat_prompt_renders(
    gpt2_chat: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from paperstack.llm import (
        FALLBACK_CHAT_TEMPLATE,
        ensure_chat_template,
        fallback_chat_prompt,
        prepare_tokenizer,
    )

    tokenizer = copy.deepcopy(gpt2_chat.tokenizer)
    assert not tokenizer.chat_template
    with caplog.at_level("WARNING", logger="paperstack.llm"):
        assert ensure_chat_template(tokenizer, name="fallback-gpt2") is True
        assert ensure_chat_template(tokenizer, name="fallback-gpt2") is False  # already has one
    assert [r.getMessage().count("fallback-gpt2") for r in caplog.records] == [1]
    conversations = [
        [{"role": "user", "content": "What is 2+2?"}],
        [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And 3+3?"},
        ],
    ]
    for messages in conversations:
        rendered = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        assert rendered == fallback_chat_prompt(messages)
        # trl's prompt-completion check: the prompt is a prefix of prompt plus completion
        full = tokenizer.apply_chat_template(
            [*messages, {"role": "assistant", "content": "6"}], tokenize=False
        )
        assert full == rendered + " 6\n"
    tokenizer.save_pretrained(tmp_path)  # the template travels with the tokenizer
    reloaded = type(tokenizer).from_pretrained(tmp_path)
    assert reloaded.chat_template == FALLBACK_CHAT_TEMPLATE

    from paperstack.llm import cut_fallback_turn

    # a base model writes the next turn itself: cut there, only on the fallback template
    assert cut_fallback_turn(" 4\nUser: and 3+3?\nAssistant: 6", tokenizer) == " 4"
    assert cut_fallback_turn(" 4\nSystem: be brief") == " 4"
    assert cut_fallback_turn(" 4, no turn after") == " 4, no turn after"
    own = copy.deepcopy(gpt2_chat.tokenizer)
    own.chat_template = "{{ messages[0]['content'] }}"
    assert cut_fallback_turn(" 4\nUser: x", own) == " 4\nUser: x"  # its own template

    bare = copy.deepcopy(gpt2_chat.tokenizer)
    assert bare.pad_token is None
    prepare_tokenizer(bare, need_chat_template=True, name="gpt2-fb", chat_template="fallback")
    assert bare.chat_template == FALLBACK_CHAT_TEMPLATE
    assert bare.pad_token == bare.eos_token
    with pytest.raises(LLMError, match="chat_template must be 'fallback' or 'require'"):
        prepare_tokenizer(bare, need_chat_template=True, name="x", chat_template="maybe")  # type: ignore[arg-type]


def test_transformers_from_pretrained_round_trip(tiny_chat: Any, tmp_path: Path) -> None:
    from paperstack.llm import TransformersChat

    tiny_chat.model.save_pretrained(tmp_path)
    tiny_chat.tokenizer.save_pretrained(tmp_path)
    loaded = TransformersChat.from_pretrained(str(tmp_path), device="cpu", local_files_only=True)
    assert loaded.name == str(tmp_path)
    chat = [{"role": "user", "content": "hi"}]
    assert loaded.generate([chat], max_new_tokens=4) == tiny_chat.generate([chat], max_new_tokens=4)
    np.testing.assert_allclose(
        loaded.logprobs(["abc"], ["de"])[0], tiny_chat.logprobs(["abc"], ["de"])[0], atol=1e-6
    )
    with pytest.raises(PaperstackError, match="cannot load"):
        TransformersChat.from_pretrained(str(tmp_path / "missing"), local_files_only=True)


def test_recorder_over_transformers_replays_exact_scores(tiny_chat: Any, tmp_path: Path) -> None:
    cassette = tmp_path / "tiny.jsonl"
    with Recorder(tiny_chat, cassette) as rec:
        live = rec.logprobs(["abc"], ["def"])[0]
    replayed = Recorder(None, cassette, mode="replay").logprobs(["abc"], ["def"])[0]
    assert replayed.dtype == live.dtype
    assert np.array_equal(replayed, live)


# --------------------------------------------------------------------------- HTTP


class FakeOpenAI:
    """Minimal OpenAI-compatible server state: injected failures, a stall, recorded requests."""

    def __init__(self) -> None:
        self.fail_with: list[tuple[int, dict[str, Any]]] = []
        self.stall = 0.0
        self.echo_logprobs = True
        self.ignore_n = False  # as transformers serve does
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes]:
        if self.fail_with:
            return self.fail_with.pop(0)
        n = 1 if self.ignore_n else body.get("n", 1)
        usage = {"prompt_tokens": 3, "completion_tokens": 2 * n, "total_tokens": 3 + 2 * n}
        if path == "/v1/chat/completions":
            text = body["messages"][-1]["content"].upper()
            choices = [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": f"{text}{i}"},
                    "finish_reason": "stop",
                }
                for i in reversed(range(n))  # any order; the client sorts
            ]
            return 200, {"object": "chat.completion", "choices": choices, "usage": usage}
        if path == "/v1/completions":
            prompt = body["prompt"]
            if body.get("echo"):
                # Character-level "tokens"; token k gets logprob -(k / 10), the first none.
                logprobs = {
                    "tokens": list(prompt),
                    "token_logprobs": [None] + [-k / 10 for k in range(1, len(prompt))],
                    "text_offset": list(range(len(prompt))),
                    "top_logprobs": None,
                }
                choice = {"index": 0, "text": prompt}
                choice["logprobs"] = logprobs if self.echo_logprobs else None
                return 200, {"object": "text_completion", "choices": [choice]}
            choices = [
                {"index": i, "text": f"{prompt[::-1]}{i}", "finish_reason": "length"}
                for i in range(n)
            ]
            return 200, {"object": "text_completion", "choices": choices, "usage": usage}
        return 404, {"object": "error", "message": f"no route {path}", "code": 404}


@pytest.fixture
def server() -> Iterator[tuple[str, FakeOpenAI]]:
    state = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            with state.lock:
                state.requests.append((self.path, body, dict(self.headers)))
                status, payload = state.answer(self.path, body)
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
            if state.stall:
                time.sleep(state.stall)
            with state.lock:
                state.in_flight -= 1
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (timeout test)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback requests must never be routed through a proxy from the environment."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def _client(url: str, **kwargs: Any) -> Any:
    from paperstack.llm import OpenAIChat

    pytest.importorskip("httpx")
    options: dict[str, Any] = {"timeout": 2.0, "max_retries": 2, "backoff": 0.01}
    options.update(kwargs)
    return OpenAIChat(url, "served-model", **options)


def test_http_generate_chat_and_completion(
    server: tuple[str, FakeOpenAI], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, state = server
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    with _client(url) as chat:
        assert isinstance(chat, ChatModel)
        assert chat.name == "served-model"
        assert "sk-secret" not in repr(chat)
        out = chat.generate(
            [[{"role": "user", "content": "hi"}], "abc"],
            n=2,
            seed=5,
            stop=["\n"],
            max_new_tokens=9,
            temperature=0.7,
        )
    assert out == [["HI0", "HI1"], ["cba0", "cba1"]]
    paths = sorted(path for path, _, _ in state.requests)
    assert paths == ["/v1/chat/completions", "/v1/completions"]
    for _, body, headers in state.requests:
        assert body["model"] == "served-model"
        assert body["n"] == 2
        assert body["seed"] == 5
        assert body["max_tokens"] == 9
        assert body["stop"] == ["\n"]
        assert headers["Authorization"] == "Bearer sk-secret"


def test_http_greedy_n_asks_once_and_repeats(server: tuple[str, FakeOpenAI]) -> None:
    """Greedy decoding has one answer; vLLM refuses n > 1 at temperature 0, so the client asks
    once (without n) and repeats it."""
    url, state = server
    with _client(url) as chat:
        out = chat.generate(["abc"], n=3, temperature=0.0, max_new_tokens=4)
    assert out == [["cba0", "cba0", "cba0"]]
    assert len(state.requests) == 1
    assert "n" not in state.requests[0][1]


def test_http_logprobs_from_echoed_prompt(
    server: tuple[str, FakeOpenAI], request: pytest.FixtureRequest
) -> None:
    url, state = server
    chat = _client(url + "/v1/")  # the SDK-style base URL works as well
    request.addfinalizer(chat.close)
    got = chat.logprobs(["abc", "hello "], ["de", "x"])
    np.testing.assert_allclose(got[0], [-0.3, -0.4])
    np.testing.assert_allclose(got[1], [-0.6])
    body = state.requests[0][1]
    assert body["echo"] is True
    assert body["logprobs"] == 1
    assert body["max_tokens"] == 1
    with pytest.raises(LogprobsUnsupportedError, match="string prompts"):
        chat.logprobs([[{"role": "user", "content": "a"}]], ["b"])
    state.echo_logprobs = False
    with pytest.raises(LogprobsUnsupportedError, match="no echoed prompt logprobs"):
        chat.logprobs(["abc"], ["d"])


def test_http_retries_after_503(server: tuple[str, FakeOpenAI]) -> None:
    url, state = server
    busy = (503, {"object": "error", "message": "model is loading"})
    state.fail_with = [busy, busy]
    with _client(url, max_retries=2) as chat:
        assert chat.generate(["ab"]) == [["ba0"]]
    assert len(state.requests) == 3
    state.fail_with = [busy, busy, busy]
    expected = r"HTTP 503 after 3 attempt\(s\): model is loading"
    with pytest.raises(BackendHTTPError, match=expected) as info:
        _client(url, max_retries=2).generate(["ab"])
    assert info.value.status == 503


def test_http_400_fails_at_once_with_server_message(server: tuple[str, FakeOpenAI]) -> None:
    url, state = server
    error = {"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}}
    state.fail_with = [(400, error)]
    with pytest.raises(BackendHTTPError, match="max_tokens is too large") as info:
        _client(url, max_retries=3).generate(["ab"])
    assert info.value.status == 400
    assert len(state.requests) == 1


def test_http_timeout(server: tuple[str, FakeOpenAI]) -> None:
    url, state = server
    state.stall = 0.6
    start = time.monotonic()
    with pytest.raises(BackendTimeoutError, match=r"no answer within 0\.2 s"):
        _client(url, timeout=0.2, max_retries=0).generate(["ab"])
    assert time.monotonic() - start < 0.55


def test_http_unreachable_server_names_the_url() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(BackendUnreachableError) as info:
        _client(url, max_retries=1).generate(["ab"])
    message = str(info.value)
    assert f"{url}/v1/completions" in message
    assert "\n" not in message
    assert isinstance(info.value, PaperstackError)


def test_http_bad_base_url() -> None:
    with pytest.raises(LLMError, match="base_url"):
        _client("localhost:8000")


def test_http_returns_usage_and_finish_reason_and_fills_the_ledger(
    server: tuple[str, FakeOpenAI],
) -> None:
    from paperstack.llm import Completion

    url, _ = server
    with _client(url) as chat:
        out = chat.generate([[{"role": "user", "content": "hi"}], "abc"])
        ledger = chat.ledger.to_json()
    first = out[0][0]
    assert isinstance(first, Completion)
    assert first == "HI0"
    assert (first.finish_reason, first.prompt_tokens, first.completion_tokens) == ("stop", 3, 2)
    assert out[1][0].finish_reason == "length"
    assert ledger["calls"] == 2
    assert ledger["prompt_tokens"] == 6
    assert ledger["completion_tokens"] == 4
    assert ledger["retries"] == 0
    assert ledger["unmetered_calls"] == 0


def test_http_server_that_ignores_n_gets_one_request_per_sample(
    server: tuple[str, FakeOpenAI],
) -> None:
    url, state = server
    state.ignore_n = True
    with _client(url) as chat:
        out = chat.generate(["abc"], n=3, temperature=1.0, seed=7)
    assert len(out[0]) == 3
    seeds = [body.get("seed") for _, body, _ in state.requests]
    assert seeds == [7, 8, 9]  # distinct samples, still reproducible


def test_http_sampling_check_catches_a_server_that_ignores_temperature(
    server: tuple[str, FakeOpenAI],
) -> None:
    url, state = server  # the fake answers every request for a prompt with the same text
    with _client(url) as chat:
        assert chat.samples_differ is None
        assert chat.check_sampling() is False
        assert chat.check_sampling() is False  # cached
        with pytest.raises(LLMError) as info:
            chat.require_sampling("diversity@k")
    bodies = [body for path, body, _ in state.requests]
    assert [path for path, _, _ in state.requests] == ["/v1/chat/completions"] * 4
    assert sorted(b["seed"] for b in bodies) == [0, 1, 2, 3]
    assert {b["temperature"] for b in bodies} == {1.0}
    assert chat.samples_differ is False
    assert str(info.value) == (
        f"{url}/v1 model served-model: 4 samples at temperature 1.0 were identical; the server "
        "ignores temperature (transformers serve does when the model's generation_config lacks "
        "do_sample): diversity@k needs distinct samples"
    )
    assert chat.sampling_report is not None
    assert str(info.value).startswith(chat.sampling_report)


def test_http_sampling_check_falls_back_to_completions_without_chat(
    server: tuple[str, FakeOpenAI],
) -> None:
    url, state = server
    state.fail_with = [(400, {"message": "this model has no chat template"})]
    with _client(url, concurrency=1) as chat:
        assert chat.check_sampling() is False
    paths = [path for path, _, _ in state.requests]
    assert paths[0] == "/v1/chat/completions"
    assert paths[-4:] == ["/v1/completions"] * 4


def test_http_malformed_json_is_retried_then_one_line(server: tuple[str, FakeOpenAI]) -> None:
    url, state = server
    state.fail_with = [(200, b"{not json")] * 3
    chat = _client(url, max_retries=2)
    with pytest.raises(BackendHTTPError, match=r"not JSON after 3 attempt") as info:
        chat.generate(["ab"])
    assert "\n" not in str(info.value)
    assert len(state.requests) == 3
    assert chat.ledger.to_json()["failed"] == 1
    assert chat.ledger.to_json()["retries"] == 2
    state.fail_with = [(200, b"[1, 2]")]
    assert chat.generate(["ab"]) == [["ba0"]]  # retried once, then answered


def test_http_500s_are_retried_a_bounded_number_of_times(server: tuple[str, FakeOpenAI]) -> None:
    url, state = server
    state.fail_with = [(500, {"detail": "boom"})] * 10
    with pytest.raises(BackendHTTPError, match=r"HTTP 500 after 4 attempt.*boom"):
        _client(url, max_retries=3).generate(["ab"])
    assert len(state.requests) == 4


def test_http_one_concurrency_limit_for_the_whole_backend(server: tuple[str, FakeOpenAI]) -> None:
    url, state = server
    state.stall = 0.1
    chat = _client(url, concurrency=2, timeout=5.0)
    threads = [
        threading.Thread(target=chat.generate, args=([f"p{t}{i}" for i in range(4)],))
        for t in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(state.requests) == 12
    assert state.max_in_flight == 2  # three callers, one limit
    chat.close()
