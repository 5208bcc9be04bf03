"""The paperstack conformance suite (paperstack.testing.conformance) on meta-pref's command line."""

import pytest
from meta_pref.cli import cli

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _smallest_demo(monkeypatch):
    """The suite's in-process `demo --quick` shrunk to seconds (tests/test_demo.py runs the
    real --quick): one outer step of everything, a few pairs, two adaptation steps."""
    from meta_pref import demo
    from meta_pref.adapt import AdaptSettings
    from meta_pref.meta import MetaConfig

    tiny_meta = MetaConfig(outer_steps=1, meta_batch=2, inner_steps=1, support=8, query=8)
    small = demo.QUICK.__class__(
        sizes=(25, 100, 1000),
        source_pairs=60,
        eval_pairs=40,
        eval_prompts=10,
        sft_steps=2,
        sft_texts=100,
        meta=tiny_meta,
        dpo_meta=tiny_meta,
        dpo_sizes=(100,),
        rm_adapt=AdaptSettings(epochs=1, max_steps=1),
        dpo_adapt=AdaptSettings(epochs=1, max_steps=1),
    )
    monkeypatch.setattr(demo, "QUICK", small)


test_conformance = conformance_tests(cli)
