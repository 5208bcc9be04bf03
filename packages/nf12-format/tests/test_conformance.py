"""The paperstack conformance suite (paperstack.testing.conformance) on nf12's command line."""

import pytest
import torch
from nf12 import demo
from nf12.cli import cli

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _small_quick_demo(monkeypatch):
    """The in-process runs use a smaller --quick: one small Qwen3, two repeats, one group, and
    MiniLM's first encoder layer in place of the whole model. The suite checks the command
    line's contract (every zoo checkpoint through ``--model``, refusals, SIGTERM, a full disk);
    what the demo measures on all of MiniLM is tested by tests/test_demo.py. The whole model
    made each of the six ``model[demo-*]`` runs 14-15 s (its 11.7M-weight word embedding in
    the pure-Python Huffman baseline), most of the package's fast suite."""
    small = demo.DemoConfig(qwen_hidden=64, qwen_layers=1, qwen_vocab=64, repeats=2, groups=(8,))
    monkeypatch.setattr(demo, "QUICK", small)
    whole = demo.minilm_state

    def first_layer() -> dict[str, torch.Tensor]:
        return {k: v for k, v in whole().items() if k.startswith("encoder.layer.0.")}

    monkeypatch.setattr(demo, "minilm_state", first_layer)


test_conformance = conformance_tests(cli)
