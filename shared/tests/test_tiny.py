"""paperstack.tiny: tokenizer, chat template, model round trip, training, cache, and the floors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import PreTrainedTokenizerFast  # noqa: E402

from paperstack import tasks, tiny  # noqa: E402


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    return tiny.build_tokenizer()


def test_tokenizer_round_trips_text_one_token_per_character(tok: PreTrainedTokenizerFast) -> None:
    text = "Make 30 with 2 4 7.\n(7*4)+2 What is the city of Bena?"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tok.decode(ids) == text
    assert tok.decode(tok("naïve", add_special_tokens=False)["input_ids"]) == "na<unk>ve"
    special = tok("<s><|user|>hi</s>", add_special_tokens=False)["input_ids"]
    assert special[0] == tok.bos_token_id
    assert special[-1] == tok.eos_token_id
    assert len(special) == 5
    assert tok.pad_token_id != tok.eos_token_id


def test_chat_template_renders_prompt_then_answer(tok: PreTrainedTokenizerFast) -> None:
    user = [{"role": "user", "content": "1+2="}]
    prompt = tok.apply_chat_template(user, add_generation_prompt=True, tokenize=False)
    assert prompt == "<s><|user|>1+2=<|assistant|>"
    full = tok.apply_chat_template([*user, {"role": "assistant", "content": "3"}], tokenize=False)
    assert full == prompt + "3</s>"
    with_system = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, *user],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert with_system == "<s><|system|>Be brief.<|user|>1+2=<|assistant|>"
    with pytest.raises(Exception, match="unknown chat role"):
        tok.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_tokenizer_and_model_round_trip_through_from_pretrained(
    tok: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    model = tiny.build_model("micro", tok, seed=1)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model2, tok2 = tiny.load(tmp_path)
    x = torch.tensor([tok("<s><|user|>12+34=<|assistant|>", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model(input_ids=x).logits, model2(input_ids=x).logits)
    assert tok2.chat_template == tok.chat_template
    assert (
        tok2("a b\n", add_special_tokens=False)["input_ids"]
        == tok("a b\n", add_special_tokens=False)["input_ids"]
    )
    assert type(model2).__name__ == "LlamaForCausalLM"


def test_build_model_is_seeded_and_presets_are_sized(tok: PreTrainedTokenizerFast) -> None:
    a, b = tiny.build_model("micro", tok, seed=0), tiny.build_model("micro", tok, seed=0)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    n_default = sum(p.numel() for p in tiny.build_model(tiny.DEFAULT_PRESET, tok).parameters())
    assert 1_000_000 <= n_default <= 3_000_000
    with pytest.raises(tiny.TinyError, match="unknown preset"):
        tiny.build_model("huge", tok)


def test_encoded_examples_mask_only_the_answer(tok: PreTrainedTokenizerFast) -> None:
    ex = tasks.get("addition").make(1, 2)
    ids, mask, lengths = tiny.encode_examples(tok, [ex])
    text = tok.decode(ids[0, : lengths[0]])
    assert text == "<s><|user|>10+20=<|assistant|>300</s>"
    assert tok.decode(ids[0][mask[0]]) == "300</s>"


def test_a_few_training_steps_reduce_the_loss(tok: PreTrainedTokenizerFast) -> None:
    model = tiny.build_model("micro", tok, seed=0)
    stats = tiny.train(model, tok, ["addition"], steps=40, batch_size=32, lr=1e-2, progress=False)
    first, last = sum(stats["losses"][:5]) / 5, sum(stats["losses"][-5:]) / 5
    assert last < 0.8 * first


def test_evaluate_and_complete_on_a_tiny_budget(tok: PreTrainedTokenizerFast) -> None:
    model = tiny.build_model("micro", tok, seed=0)
    acc = tiny.evaluate(model, tok, "countdown", n=12)
    assert 0.0 <= acc <= 1.0
    outs = tiny.complete(
        model, tok, ["1+2=", "What is the city of Bena?", "1+2="], max_new_tokens=4
    )
    assert len(outs) == 3
    assert outs[0] == outs[2]  # greedy and independent of batching
    assert all(isinstance(o, str) and len(o) <= 4 for o in outs)


def test_cache_path_is_keyed_by_every_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path))
    base = tiny.pretrained_path("micro", ("addition",), steps=5, seed=0)
    assert base.parent == tmp_path / "tiny"
    assert base == tiny.pretrained_path("micro", ["addition"], steps=5, seed=0)
    variants = [
        tiny.pretrained_path("tiny", ("addition",), steps=5, seed=0),
        tiny.pretrained_path("micro", ("countdown",), steps=5, seed=0),
        tiny.pretrained_path("micro", ("addition", "facts"), steps=5, seed=0),
        tiny.pretrained_path("micro", ("addition",), steps=6, seed=0),
        tiny.pretrained_path("micro", ("addition",), steps=5, seed=1),
        tiny.pretrained_path("micro", (tasks.get("addition", digits=3),), steps=5, seed=0),
        tiny.pretrained_path("micro", ("addition",), steps=5, seed=0, cache_dir=tmp_path / "x"),
    ]
    assert len({base, *variants}) == len(variants) + 1
    with pytest.raises(tiny.TinyError, match="task_mix is empty"):
        tiny.pretrained_path("micro", ())


def test_cache_key_covers_the_code_of_a_package_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task defined outside paperstack.tasks: its module's code is part of the key."""
    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path))
    module = tmp_path / "pkg_task.py"
    source = (
        "from dataclasses import dataclass\n"
        "from typing import ClassVar\n"
        "from paperstack.tasks import Addition\n\n"
        "@dataclass(frozen=True)\n"
        "class Shifted(Addition):\n"
        "    name: ClassVar[str] = 'shifted'\n"
        "    def format_answer(self, total: int) -> str:\n"
        "        return str(total + {shift})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    paths = []
    for shift in (1, 2):
        module.write_text(source.format(shift=shift))
        mod = importlib.import_module("pkg_task")
        mod = importlib.reload(mod)
        paths.append(tiny.pretrained_path("micro", (mod.Shifted(),), steps=5, seed=0))
    assert paths[0] != paths[1]
    # the core's own tasks keep the key they had (no task_code entry)
    assert "task_code" not in tiny._cache_key(
        "micro", [tasks.get("addition")], tiny.Recipe(steps=5), 0
    )


def test_pretrained_caches_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    real_train = tiny.train

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(tiny, "train", killed)
    with pytest.raises(KeyboardInterrupt):
        tiny.pretrained("micro", ("addition",), steps=3, progress=False)
    left = [p.name for p in (tmp_path / "tiny").iterdir() if not p.name.endswith(".lock")]
    assert left == []  # nothing half-written, no temp left

    monkeypatch.setattr(tiny, "train", real_train)
    model, _ = tiny.pretrained("micro", ("addition",), steps=3, progress=False)
    path = tiny.pretrained_path("micro", ("addition",), steps=3)
    entries = [p.name for p in (tmp_path / "tiny").iterdir() if not p.name.endswith(".lock")]
    assert entries == [path.name]
    assert (path / "paperstack-tiny.json").is_file()
    assert (path / "config.json").is_file()
    # the thread count that trained it (it changes the weights) is recorded, not keyed
    assert tiny.training_record(path)["threads"] == 1  # OMP_NUM_THREADS=1, set above

    monkeypatch.setattr(tiny, "train", killed)  # a cache hit must not train again
    model2, _ = tiny.pretrained("micro", ("addition",), steps=3, progress=False)
    for p, q in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.slow
def test_two_processes_asking_at_once_train_once(tmp_path: Path) -> None:
    """The second process waits on the first's lock and loads what it trained.

    Slow (two fresh interpreters import torch and transformers); the lock itself is covered
    fast by ``test_cache.py::test_two_processes_build_once``.

    Whoever trains first waits (inside the lock) until both processes have started and then a
    second more, so the other one is sure to be blocked on the lock rather than arriving after
    the cache entry exists; a few steps then suffice.
    """
    log = tmp_path / "trained.log"
    started = tmp_path / "started"
    started.mkdir()
    code = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from paperstack import tiny\n"
        f"started = Path({str(started)!r})\n"
        "(started / str(os.getpid())).touch()\n"
        "real = tiny.train\n"
        "def logged(*a, **k):\n"
        f"    open({str(log)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "    deadline = time.monotonic() + 120\n"
        "    while len(list(started.iterdir())) < 2 and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "    time.sleep(1.0)\n"
        "    return real(*a, **k)\n"
        "tiny.train = logged\n"
        "model, _ = tiny.pretrained('micro', ('addition',), steps=5, progress=False)\n"
        "print(float(sum(p.sum() for p in model.parameters())))\n"
    )
    env = {**os.environ, "PAPERSTACK_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert len(list(started.iterdir())) == 2
    assert len(log.read_text().splitlines()) == 1  # trained once
    assert outs[0] == outs[1]  # and both have the same weights
    entries = [p for p in (tmp_path / "cache" / "tiny").iterdir() if p.suffix != ".lock"]
    assert len(entries) == 1


def test_cache_key_follows_the_code_not_its_docstrings(tmp_path: Path) -> None:
    source = Path(tiny.__file__).read_text()
    files = {
        "same": source,
        "docs": source.replace(
            '"""The toy world\'s models', '"""Reworded: the toy world\'s models'
        ),
        "comment": source.replace("#: Per-task defaults", "#: Per-task defaults (edited)"),
        "code": source.replace("return 0.1 + 0.9 * 0.5", "return 0.2 + 0.8 * 0.5"),
    }
    digests = {}
    for name, text in files.items():
        assert name == "same" or text != source  # every edit really applied
        path = tmp_path / name / "tiny.py"
        path.parent.mkdir()
        path.write_text(text)
        digests[name] = tiny.code_digest([path])
    assert digests["docs"] == digests["same"] == digests["comment"]
    assert digests["code"] != digests["same"]
    key = tiny._cache_key("micro", [tasks.get("addition")], tiny.Recipe(steps=5), 0)
    assert key["code"] == tiny.code_digest()


# ------------------------------------------------------------------ the floors (slow)

FLOORS = {"addition": 0.90, "facts": 0.90, "countdown": 0.50}
N_EVAL = 500


@pytest.mark.slow
@pytest.mark.parametrize("task", list(FLOORS))
def test_default_preset_solves_each_task_alone(
    task: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    record_property: Callable[[str, object], None],
) -> None:
    start = time.perf_counter()
    model, tok = tiny.pretrained(tiny.DEFAULT_PRESET, (task,), cache_dir=tmp_path, progress=False)
    train_s = time.perf_counter() - start
    acc = tiny.evaluate(model, tok, task, n=N_EVAL, seed=0)
    line = (
        f"[paperstack.tiny] preset={tiny.DEFAULT_PRESET} task={task} "
        f"steps={tiny.RECIPES[task].steps} train={train_s:.0f}s "
        f"held-out accuracy={acc:.3f} (n={N_EVAL}, floor {FLOORS[task]:.2f})"
    )
    record_property(f"{task}_heldout_accuracy", acc)
    print(line)  # captured: shown by -rA, on failure, and relayed by pytest-xdist workers
    with capsys.disabled():  # and straight to the terminal in a plain run
        print("\n" + line)
    assert acc >= FLOORS[task], line
