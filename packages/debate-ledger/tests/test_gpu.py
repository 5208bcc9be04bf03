"""On a CUDA device: the LM family debates on the GPU, and one call's answer depends only on
its seed there too (what makes crash-and-resume exact). Skipped without CUDA."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_lm_family_on_cuda_is_exact_about_seeds(tmp_path):
    torch = pytest.importorskip("torch")
    from debate_ledger.prompts import TINY_PROMPTS
    from debate_ledger.questions import fact_questions
    from debate_ledger.runner import DebateConfig, run_debates
    from debate_ledger.schemas import read_ledger

    from paperstack import tiny
    from paperstack.llm import TransformersChat

    tok = tiny.build_tokenizer()
    model = tiny.build_model(tiny.QUICK_PRESET, tok, seed=0)
    chat = TransformersChat(model, tok, device="cuda", name="micro-cuda")
    assert chat.device.type == "cuda"
    qs = fact_questions(6, seed=0)
    cfg = DebateConfig(agents=2, rounds=1, resamples=1, seeds=(0, 1), prompts=TINY_PROMPTS,
                       max_new_tokens=4, temperature=1.0)  # fmt: skip
    a = run_debates(chat, qs, tmp_path / "a.jsonl", family="tiny", config=cfg)
    b = run_debates(chat, qs[::-1], tmp_path / "b.jsonl", family="tiny", config=cfg)
    key = {r.key: r.response for r in read_ledger(tmp_path / "a.jsonl")}
    assert {r.key: r.response for r in read_ledger(tmp_path / "b.jsonl")} == key
    assert len(a.rows) == len(b.rows) == 6 * 2 * 2 * 3
    assert torch.cuda.is_available()
