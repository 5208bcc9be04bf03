"""The fine-tuned LM selector: trl SFT on oracle records, constrained answers, the worker."""

import json

import numpy as np
import pytest
from pall_lns.context import Context, Event, context_to_json
from pall_lns.errors import PallError
from pall_lns.lm import LMRecipe, LMSelector, sft_examples, train_lm

TINY = LMRecipe(preset="micro", steps=6, batch_size=4)


def _ctx(stall: int, n_ops: int = 3) -> Context:
    return Context(
        n_ops, tuple(f"op{i}" for i in range(n_ops)), 500, 100, 0.02, 1.0, 0.4, 7, stall, 0.2,
        0.05, (Event(1, 0.02, True, "optimal", 0.2),), (0.01,) * n_ops, (2,) * n_ops,
    )  # fmt: skip


def _records(n: int = 24) -> list[dict]:
    out = []
    for i in range(n):
        stall = i % 6
        label = 2 if stall >= 3 else 0  # the oracle's rule: op 2 once the search stalls
        rewards = [0.0, 0.0, 0.0]
        rewards[label] = 0.1
        out.append({"instance": "t", "state": i, "context": context_to_json(_ctx(stall)),
                    "rewards": rewards, "label": label})  # fmt: skip
    out.append({"instance": "t", "state": n, "context": context_to_json(_ctx(0)),
                "rewards": [0.0, 0.0, 0.0], "label": 0})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    return train_lm(_records(), 3, TINY, out=tmp_path_factory.mktemp("lm") / "m")


def test_sft_examples_are_prompt_completion_pairs_of_informative_states():
    ex = sft_examples(_records())
    assert len(ex) == 24  # the all-zero state is left out: its label is arbitrary
    assert ex[0]["prompt"][0]["role"] == "user"
    assert "stall 0" in ex[0]["prompt"][0]["content"]
    assert ex[3]["completion"] == [{"role": "assistant", "content": "OP=2"}]
    with pytest.raises(PallError, match="no informative state"):
        sft_examples(_records()[-1:])


def test_sft_trains_saves_and_reloads_through_from_pretrained(lm_dir):
    meta = json.loads((lm_dir / "pall-lm.json").read_text())
    assert meta["examples"] == 24
    assert meta["n_ops"] == 3
    assert (lm_dir / "model.safetensors").is_file()
    assert (lm_dir / "tokenizer.json").is_file()
    sel = LMSelector.load(lm_dir)
    for stall in range(6):
        assert 0 <= sel.select(_ctx(stall)) < 3  # constrained to the ensemble
    assert len(sel.latencies) == 6
    scores = sel.scores(_ctx(4))
    assert scores.shape == (3,)
    assert np.all(np.isfinite(scores))


@pytest.mark.slow  # a fresh worker process imports torch; the quick demo's "pall" rows
# (tests/test_demo.py) run the LM selector in the same async worker on every fast run
def test_lm_selector_runs_in_the_async_worker(lm_dir):
    from pall_lns.async_select import AsyncSelector

    sel = LMSelector.load(lm_dir)
    asel = AsyncSelector(sel, 3, deadline=60.0)
    try:
        asel.submit(_ctx(5))
        assert asel.collect() == sel.select(_ctx(5))  # the same model answers the same
        assert asel.latencies[-1] > 0
    finally:
        asel.close()


def test_lm_refuses_a_wrong_ensemble_and_a_corrupt_folder(lm_dir, tmp_path):
    import shutil

    sel = LMSelector.load(lm_dir)
    with pytest.raises(PallError, match="trained for 3 operators"):
        sel.select(_ctx(1, n_ops=4))
    bad = tmp_path / "bad"
    shutil.copytree(lm_dir, bad)
    weights = bad / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(Exception, match=r"model\.safetensors") as info:
        LMSelector.load(bad)
    assert "\n" not in str(info.value)
    with pytest.raises(PallError, match="no such model folder"):
        LMSelector.load(tmp_path / "none", 3)


@pytest.mark.gpu
def test_lm_selector_on_cuda_chooses_as_on_cpu(lm_dir):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    cpu = LMSelector.load(lm_dir)
    gpu = LMSelector.load(lm_dir, device="cuda")
    for stall in range(6):
        assert gpu.select(_ctx(stall)) == cpu.select(_ctx(stall))
    assert np.allclose(gpu.scores(_ctx(4)), cpu.scores(_ctx(4)), atol=1e-3)


def test_pall_solve_takes_an_lm_folder_as_selector(lm_dir, smoke_dir, tmp_path):
    import shutil

    from pall_lns.cli import main
    from pall_lns.selectors import load_default

    # an LM for the shipped ensemble's size, from the module's model (same tokenizer)
    k = len(load_default().ops)
    folder = tmp_path / "lm"
    shutil.copytree(lm_dir, folder)
    meta = json.loads((folder / "pall-lm.json").read_text())
    (folder / "pall-lm.json").write_text(json.dumps({**meta, "n_ops": k}))
    sol = tmp_path / "x.sol"
    argv = ["solve", str(smoke_dir / "auction-smoke-s7.lp"), "--time-limit", "0.8", "--quiet"]
    assert main([*argv, "--selector", str(folder), "--sync", "--sol", str(sol)]) == 0
    assert sol.read_text().startswith("objective value:")


def test_train_lm_builds_once_in_the_cache_and_retrains_an_explicit_out(tmp_path, monkeypatch):
    """The cache entry goes through paperstack.cache.build_once: built once, marked complete
    by pall-lm.json, never left half-written; an explicit ``out`` is retrained each time."""
    import pall_lns.lm as lm

    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path / "cache"))
    calls = []

    def fake(tmp, records, n_ops, recipe, base, device, log):
        calls.append(tmp)
        (tmp / "weights").write_text(str(len(calls)))
        return {"n_ops": n_ops}

    monkeypatch.setattr(lm, "_train_into", fake)
    a = train_lm(_records(), 3, TINY)
    b = train_lm(_records(), 3, TINY)
    assert a == b
    assert len(calls) == 1
    assert a.parent == tmp_path / "cache" / "pall-lns"
    assert json.loads((a / "pall-lm.json").read_text()) == {"n_ops": 3}
    assert not [p for p in a.parent.iterdir() if p.name.endswith(".tmp")]
    out = tmp_path / "mine"
    train_lm(_records(), 3, TINY, out=out)
    train_lm(_records(), 3, TINY, out=out)
    assert len(calls) == 3
    assert (out / "weights").read_text() == "3"

    def killed(tmp, *args):
        (tmp / "half-written").write_text("x")
        raise RuntimeError("killed")

    monkeypatch.setattr(lm, "_train_into", killed)
    other = LMRecipe(preset="micro", steps=7, batch_size=4)
    with pytest.raises(RuntimeError, match="killed"):
        train_lm(_records(), 3, other)
    assert sorted(p.name for p in a.parent.iterdir() if not p.name.endswith(".lock")) == [a.name]
