"""Shared fixtures: one thread (the CI machine has two cores), a micro model and a small world."""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def micro():
    """A randomly initialised micro Llama and the character tokenizer (built from configs)."""
    import transformers

    from paperstack import tiny

    transformers.logging.set_verbosity_error()
    tok = tiny.build_tokenizer()
    model = tiny.build_model("micro", tok, seed=0)
    model.eval()
    return model, tok


@pytest.fixture(scope="session")
def splits():
    from ra2_unlearn.data import fact_splits

    from paperstack.tasks import FactWorld

    return fact_splits(FactWorld(n_entities=8), n_forget=2)


@pytest.fixture(scope="session")
def knowing():
    """A micro model that recalls every fact of a 6-entity world (trained once, then cached
    by paperstack.tiny), with that world's splits: what a patch test needs."""
    import transformers
    from ra2_unlearn.data import fact_splits

    from paperstack import tiny
    from paperstack.tasks import FactWorld

    transformers.logging.set_verbosity_error()
    world = FactWorld(n_entities=6, world_seed=0)
    model, tok = tiny.pretrained("micro", (world,), steps=400, progress=False)
    model.eval()
    return model, tok, fact_splits(world, "science", n_forget=2, n_holdout=2)


@pytest.fixture
def micro_demo(monkeypatch):
    """The --quick pipeline shrunk to seconds: micro model, 6 entities, 2 steps."""
    from ra2_unlearn import demo

    small = replace(
        demo.QUICK,
        preset="micro",
        pretrain_steps=3,
        n_entities=6,
        n_forget=2,
        n_holdout=2,
        steps=2,
        batch_size=4,
        relearn_steps=1,
        layer=1,
        lr_grid=(0.5, 1.0),
        methods=("ga", "rmu", "ra2"),
    )
    monkeypatch.setattr(demo, "QUICK", small)
    return small
