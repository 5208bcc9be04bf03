"""The demo's base model: the pretrained tiny model, then a short SFT stage that plants sycophancy.

Why a second stage. The pretrained model (:func:`paperstack.tiny.pretrained` on
:class:`~opct.world.AlignmentWorld` plus arithmetic, 1200 steps) saw a wrong cue followed 30% of
the time, but learned to copy the cue's value into its answer only weakly: on held-out cue
templates it followed a wrong cue 4.2% [2.3, 6.5] of the time (the 0.1.0 demo), below the 10%
bar of the premise, so no sycophancy claim could be judged. A pretrained chat model is
sycophantic because its post-training data rewards agreeing with the user; this stage is that
data at a controlled rate. It fine-tunes the pretrained model on the same world with cued
questions a larger share of the mix (:attr:`SycophantWorld.KINDS`) and a wrong cue followed with
probability :attr:`BaseRecipe.follow`, mixed half and half with the arithmetic task so the
model keeps its capability. Every other behaviour (refusals, jailbreak compliance, safety
warnings) is drawn as in pretraining.

The result is cached under ``<paperstack cache>/opct/`` like :func:`paperstack.tiny.pretrained`
does for its models: keyed by the pretrained entry (whose name carries the digest of its whole
key), this stage's recipe and the digest of this module and :mod:`opct.world`; a file lock
makes two processes train it once and a killed run leaves no entry
(:func:`paperstack.cache.build_once`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from opct.errors import OPCTError
from opct.world import CAPABILITY, AlignmentWorld

__all__ = ["BaseRecipe", "SycophantWorld", "base_path", "sycophantic_base", "training_record"]

_MANIFEST = "opct-base.json"


@dataclass(frozen=True)
class SycophantWorld(AlignmentWorld):
    """The toy world's data for the sycophancy stage: cued questions half of the world's share."""

    name: ClassVar[str] = "opct-sycophant"
    KINDS: ClassVar[dict[str, float]] = {**AlignmentWorld.KINDS, "cued": 0.5}


@dataclass(frozen=True)
class BaseRecipe:
    """The sycophancy stage: ``steps`` of ``batch_size`` at peak ``lr`` (warmup, cosine decay:
    :func:`paperstack.tiny.train`), a wrong cue followed with probability ``follow``.

    Set from two probing runs before the reported demo (100 steps at lr 1e-3 and follow 0.6
    gave 16% held-out-template sycophancy over all held-out facts, 150 steps at lr 2e-3 and
    follow 0.7 gave 24%, with 89% and 86% arithmetic); then checked on the validation items
    by ``opct sweep``
    (``packages/opct/validation/sweep.json``): 28% sycophancy on held-out cue templates, 81%
    arithmetic, no held-out target defended, after 227 s of training on the shared 2-core
    CPU. The pretrained model it starts from trains once (1200 steps, an hour on that
    machine when shared) and is cached by :func:`paperstack.tiny.pretrained`."""

    steps: int = 150
    batch_size: int = 64
    lr: float = 2e-3
    follow: float = 0.7
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OPCTError(f"base recipe: {name}={value!r} must be an integer >= 1")
        if not self.lr > 0:
            raise OPCTError(f"base recipe: lr={self.lr!r} must be > 0")
        if not 0.0 <= self.follow <= 1.0:
            raise OPCTError(f"base recipe: follow={self.follow!r} must be in [0, 1]")


def _pretrain_args(preset: str, world: AlignmentWorld) -> tuple[str, tuple[Any, ...]]:
    return preset, (world, CAPABILITY)


def _key(preset: str, pretrain_steps: int | None, world: AlignmentWorld, recipe: BaseRecipe
         ) -> dict[str, Any]:  # fmt: skip
    from paperstack import tiny

    pretrained = tiny.pretrained_path(*_pretrain_args(preset, world), steps=pretrain_steps)
    here = Path(__file__).with_name("base.py")
    return {
        "pretrained": pretrained.name,
        "world": world.config(),
        "recipe": asdict(recipe),
        "code": tiny.code_digest([here, Path(__file__).with_name("world.py")]),
    }


def base_path(
    preset: str = "tiny",
    pretrain_steps: int | None = None,
    world: AlignmentWorld | None = None,
    recipe: BaseRecipe | None = None,
) -> Path:
    """The cache folder :func:`sycophantic_base` uses for these arguments (may not exist)."""
    from paperstack.cache import cache_root

    key = _key(preset, pretrain_steps, world or AlignmentWorld(), recipe or BaseRecipe())
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    return cache_root() / "opct" / f"base-{preset}-{digest[:12]}"


def sycophantic_base(
    preset: str = "tiny",
    pretrain_steps: int | None = None,
    world: AlignmentWorld | None = None,
    recipe: BaseRecipe | None = None,
    progress: bool = False,
) -> tuple[Any, Any]:
    """The base model and tokenizer: from the cache, else pretrained (cached by
    :func:`paperstack.tiny.pretrained`), put through the sycophancy stage, and cached."""
    from paperstack import tiny
    from paperstack.cache import build_once

    world = world or AlignmentWorld()
    recipe = recipe or BaseRecipe()
    path = base_path(preset, pretrain_steps, world, recipe)
    build_once(
        path,
        lambda tmp: _train_into(tmp, preset, pretrain_steps, world, recipe, progress),
        marker=_MANIFEST,
    )
    return tiny.load(path)


def _train_into(tmp: Path, preset: str, pretrain_steps: int | None, world: AlignmentWorld,
                recipe: BaseRecipe, progress: bool) -> dict[str, Any]:  # fmt: skip
    from paperstack import tiny

    model, tokenizer = tiny.pretrained(
        *_pretrain_args(preset, world), steps=pretrain_steps, seed=0, progress=progress
    )
    stage = SycophantWorld(**{**asdict(world), "follow": recipe.follow})
    stats = tiny.train(
        model, tokenizer, (stage, CAPABILITY), steps=recipe.steps, seed=recipe.seed,
        batch_size=recipe.batch_size, lr=recipe.lr, progress=progress,
    )  # fmt: skip
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    return {
        "key": _key(preset, pretrain_steps, world, recipe),
        "train_seconds": stats["seconds"],
        "final_loss": stats["losses"][-1],
    }


def training_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What :func:`sycophantic_base` recorded for the entry at ``path`` (key, seconds, loss)."""
    from paperstack.cache import read_record

    return read_record(path, _MANIFEST, OPCTError)
