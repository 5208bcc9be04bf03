"""The reproduction: a tiny block-diffusion LM on long-context retrieval, five attention
policies in one decoder, and the attention time of one block at 8K and 32K tokens.

Protocol (fixed before any claim was looked at; the task layout and the premises changed in 0.3
after the 0.2 run showed random-k answering as well as exact attention, so this protocol is
exploratory relative to 0.2):

1. Train (or load from the cache) one block-diffusion LM (:mod:`mage_attention.training`) on
   :class:`~mage_attention.task.RetrievalTask` with the questions inside the answer block
   (``in_block``: the block's own queries must read the bindings out of the prefix) and a
   prompt-length curriculum. The training seed is fixed (0).
2. Premises, decided on **validation seeds** (``validation_seeds``, never reported as results):
   with exact attention the model answers well above chance; the exact attention is
   concentrated enough for a top-``k`` set (``k = L/16``, sinks and window included) to hold at
   least 90% of its prefix mass at every step; and random-``k`` at the same budget fails (its
   exact match falls well below exact attention's), so the task separates the policies. Every
   method claim requires all three. The first ``dense_layers`` layers (one, since the third
   0.3 redesign) attend exactly under every policy, as Quest keeps its first layers dense: the
   top-``k`` premise, the mass recall and the alignment are means over the sparse layers, and
   every sparse policy, random-``k`` included, follows the same rule.
3. Per reported seed and prompt length: decode every sequence's answer block with each policy
   at the same budget, ``T = B`` steps at most (a block commits its masked positions evenly over
   them). Rows: exact match per sequence (items ``seed:index``, paired across policies),
   attention-mass recall per step ``t`` (each policy on its own trajectory), and on the exact
   trajectory the overlap of step ``t``'s exact top-``k`` with step 1's (query alignment).
4. Attention time of one block (:mod:`mage_attention.timing`, :mod:`paperstack.bench`) at 8K
   and 32K with ``k = 512`` and ``T = 8``, against exact attention.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from mage_attention.attention import Budget
from mage_attention.baselines import POLICIES, make_policy
from mage_attention.decoding import generate
from mage_attention.errors import MageError
from mage_attention.modeling import ModelSpec
from mage_attention.task import RetrievalTask
from mage_attention.timing import BlockShape, bench_block, cost_rows
from mage_attention.training import Phase, pretrained
from paperstack.records import Claim, Row

__all__ = ["FULL", "QUICK", "DemoConfig", "claims_from_rows", "evaluate", "run_demo"]

ALIGNMENT_FLOOR = 0.8  # query_alignment_holds: mean step-1 / step-t top-k overlap (t >= 2)
RECALL_FLOOR = 0.95  # mage_recall_ge_0_95
PREMISE_MARGIN = 0.4  # "well above chance": exact match above chance by more than this
TOPK_FLOOR = 0.9  # premise: the exact top-k keeps at least this share of the prefix mass
RANDOM_MARGIN = 0.3  # premise: random-k's exact match below exact's by more than this
TIMING_K = 512  # the bench's fixed budget (the paper's k)


@dataclass(frozen=True)
class DemoConfig:
    spec: ModelSpec
    task: RetrievalTask
    phases: tuple[Phase, ...]
    eval_lengths: tuple[int, ...]
    claim_length: int
    sequences: int
    timing_lengths: tuple[int, ...]
    timing_shape: BlockShape
    repeats: int
    sinks: int = 4
    window: int = 16
    validation_seeds: tuple[int, ...] = (100, 101, 102, 103, 104)
    timing_steps: int = 8
    #: the first layers attend exactly under every policy (Budget.dense_layers); the premise,
    #: the recall and the alignment are measured on the other layers
    dense_layers: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def budget(self, length: int) -> Budget:
        return Budget(length // 16, self.sinks, self.window, self.dense_layers)


# Sized on prototypes of the training (validation seed 99 / 90000, not reported): hidden 128 / 3
# layers sat on the loss plateau for longer than the CPU budget; a prompt-length curriculum
# 64 -> 256 -> 768 generalises to 1024. The in-block layout (0.3) stayed on its plateau
# (4.3 nats) for 0.2's 700 first-phase steps; 2500 steps at lr 3e-3 leave it (1.5 nats).
# The task (0.3, second redesign; exploratory: after the first 0.3 run's reported seeds were
# seen), chosen among prototypes on validation seed 100 at L = 1024 by a rule fixed before the
# last two were evaluated (the largest exact - random-k gap among those whose exact match clears
# chance + 0.4): 24 bindings of 32 keys (512 binding types; the first 0.3 run): exact 0.44,
# random-k 0.15, top-k recall 0.28; 8 of 8 keys (128 types): exact 0.97 but random-k 0.83 (8
# bindings fit in the summary a late prefix token carries, which the window keeps); 16 of 16
# keys (256 types): exact 0.70, random-k 0.17, top-k recall about 0.5; records (multi-query
# associative recall) and adjacent key-value pairs never left the loss plateau in 2500 steps.
# Third redesign (exploratory; validation seeds 100-104, L = 1024, layer 0 dense for every
# policy): that model's exact top-64 held 0.703 of layer 1's prefix mass (exact 0.729, random-k
# 0.229); 400 more steps at 1024 tokens: 0.686; a last phase of 400 steps at 768 tokens with the
# attention-sharpness term (training._Sharpen) at weight 0.03: 0.889 (exact 0.760, random-k
# 0.194), at weight 0.1: 0.980 [0.974, 0.987] (exact 0.729, random-k 0.171), chosen by the rule
# fixed before these were evaluated (the candidate whose three validation premises hold).
FULL = DemoConfig(
    spec=ModelSpec(hidden_size=64, intermediate_size=128, layers=2, query_heads=4, kv_heads=2),
    task=RetrievalTask(pairs=16, queries=4, num_keys=16, in_block=True),
    phases=(
        Phase(2500, 64, 32, 3e-3),
        Phase(300, 256, 16, 2e-3),
        Phase(150, 768, 4, 1e-3),
        Phase(400, 768, 4, 1e-3, sharpen=0.1),
    ),
    eval_lengths=(512, 1024),
    claim_length=1024,
    sequences=24,
    timing_lengths=(8192, 32768),
    timing_shape=BlockShape(query_heads=16, kv_heads=4, head_dim=128),
    repeats=9,
)
QUICK = replace(
    FULL,
    phases=(Phase(40, 64, 16, 3e-3),),
    eval_lengths=(512,),
    claim_length=512,
    sequences=8,
    validation_seeds=(100,),
    timing_lengths=(8192, 32768),
    timing_shape=BlockShape(query_heads=8, kv_heads=2, head_dim=64),
    repeats=3,
)


def _split(length: int, step: int | None = None) -> str:
    return f"L={length}" if step is None else f"L={length},t={step}"


def _last_step(block: int, task: RetrievalTask) -> int:
    """The last denoising step a block takes: ``B``, or its masked positions if fewer."""
    return min(block, task.queries) if task.in_block else block


def evaluate(
    model: Any,
    task: RetrievalTask,
    config: DemoConfig,
    seeds: Sequence[int],
    policies: Sequence[str] = POLICIES,
    advance: Callable[[], None] | None = None,
    tag: str = "",
) -> list[Row]:
    """Rows of exact match, mass recall per step, top-k overlap and the exact top-k's own mass
    recall (module doc, steps 2-3); ``tag`` prefixes the splits (``val:`` for validation)."""
    block = int(model.config.block_size)
    last = _last_step(block, task)
    em: dict[tuple[str, int], dict[str, float]] = {}
    recall: dict[tuple[str, int, int | None], dict[int, float]] = {}
    overlap: dict[tuple[int, int | None], dict[int, float]] = {}
    oracle: dict[int, dict[int, float]] = {}
    layered: dict[tuple[str, str, int, int], dict[int, float]] = {}  # per layer, per seed
    for length in config.eval_lengths:
        at = task.at_length(length)
        for seed in seeds:
            batch = at.generate(config.sequences, seed=10_000 + seed)
            for name in policies:
                policy = make_policy(name, config.budget(length), seed=seed)
                res = generate(model, batch.prompt, task.queries, policy, probe=True)
                right = (res.tokens == batch.answers).float().mean(1)
                items = em.setdefault((name, length), {})
                for i, v in enumerate(right.tolist()):
                    items[f"s{seed}:{i}"] = v
                probe = res.probe
                assert probe is not None
                later = range(2, last + 1)
                if name != "exact":
                    for t in later:
                        recall.setdefault((name, length, t), {})[seed] = probe.mean_recall(
                            range(t, t + 1)
                        )
                    recall.setdefault((name, length, None), {})[seed] = probe.mean_recall(later)
                else:
                    for t in later:
                        overlap.setdefault((length, t), {})[seed] = probe.mean_overlap(
                            range(t, t + 1)
                        )
                    overlap.setdefault((length, None), {})[seed] = probe.mean_overlap(later)
                    oracle.setdefault(length, {})[seed] = probe.mean_oracle()
                for metric, label in _LAYER_METRICS[name == "exact"]:
                    for layer, v in probe.layer_means(metric).items():
                        layered.setdefault((name, label, length, layer), {})[seed] = v
                if advance:
                    advance()
    rows = [Row.from_items(n, "exact_match", v, split=tag + _split(L)) for (n, L), v in em.items()]
    rows += [
        Row.from_seeds(n, "mass_recall", v, split=tag + _split(L, t))
        for (n, L, t), v in recall.items()
    ]
    rows += [
        Row.from_seeds("exact", "topk_overlap_step1", v, split=tag + _split(L, t))
        for (L, t), v in overlap.items()
    ]
    rows += [
        Row.from_seeds("exact", "topk_mass_recall", v, split=tag + _split(L))
        for L, v in oracle.items()
    ]
    rows += [
        Row.from_seeds(n, metric, v, split=f"{tag}{_split(L)},layer={layer}")
        for (n, metric, L, layer), v in layered.items()
    ]
    return rows


#: per-layer rows: (probe metric, row metric), for a sparse policy / for exact attention
_LAYER_METRICS = {
    False: (("recall", "mass_recall"),),
    True: (("oracle", "topk_mass_recall"), ("overlap", "topk_overlap_step1")),
}


def claims_from_rows(rows: list[Row], config: DemoConfig, chance: float) -> list[Claim]:
    """The three premises (validation seeds) and the five claims, computed from the rows."""
    at = _split(config.claim_length)
    val = "val:" + at
    timing_at = f"L=32768,T={config.timing_steps}"
    k = config.claim_length // 16
    premises = [
        Claim.compare(
            "premise_exact_solves_retrieval",
            f"premise (validation seeds): with exact attention the model answers the retrieval "
            f"task at L = {config.claim_length} more than {PREMISE_MARGIN:.0%} above chance "
            f"({chance:.3f})",
            rows, lhs=("exact", "exact_match", val), op="gt", rhs=chance, margin=PREMISE_MARGIN,
        ),
        Claim.compare(
            "premise_topk_mass_recall_ge_0_9",
            f"premise (validation seeds): at every step the exact attention's own top-k (k = "
            f"L/16 = {k}, sinks and window included) holds at least {TOPK_FLOOR:.0%} of its "
            "prefix mass (mean over steps, layers, KV heads)",
            rows, lhs=("exact", "topk_mass_recall", val), op="ge", rhs=TOPK_FLOOR,
        ),
        Claim.compare(
            "premise_random_k_fails",
            f"premise (validation seeds): random-k at the same budget answers more than "
            f"{RANDOM_MARGIN:.0%} (absolute) below exact attention, so the task separates "
            "KV subsets",
            rows, lhs=("exact", "exact_match", val), op="gt", rhs=("random", "exact_match", val),
            margin=RANDOM_MARGIN,
        ),
    ]  # fmt: skip
    need = premises
    claims = [
        *premises,
        Claim.compare(
            "mage_matches_exact",
            f"MAGE's exact match is within 1 point of exact attention's at k = L/16 = {k}",
            rows, lhs=("mage", "exact_match", at), op="within", rhs=("exact", "exact_match", at),
            margin=0.01, requires=need,
        ),
        Claim.compare(
            "mage_recall_ge_0_95",
            "MAGE keeps at least 95% of the exact attention mass at steps 2..T (its step-1 set)",
            rows, lhs=("mage", "mass_recall", at), op="ge", rhs=RECALL_FLOOR, requires=need,
        ),
        Claim.compare(
            "mage_beats_quest_recall",
            "MAGE's mass recall at steps 2..T is higher than Quest's at the same k",
            rows, lhs=("mage", "mass_recall", at), op="gt", rhs=("quest", "mass_recall", at),
            requires=need,
        ),
        Claim.compare(
            "query_alignment_holds",
            f"on the exact trajectory, step t's exact top-k overlaps step 1's by at least "
            f"{ALIGNMENT_FLOOR} (mean over t = 2..T, layers, KV heads)",
            rows, lhs=("exact", "topk_overlap_step1", at), op="ge", rhs=ALIGNMENT_FLOOR,
            requires=need,
        ),
        Claim.compare(
            "mage_faster_than_exact_at_32k",
            f"one block's attention (T = {config.timing_steps} steps, k = {TIMING_K}) is faster "
            "with MAGE than exact attention at L = 32768 (median of interleaved repeats)",
            rows, lhs=("mage", "speedup_vs_exact", timing_at), op="gt", rhs=1.0, requires=need,
        ),
    ]  # fmt: skip
    return claims


def run_demo(
    config: DemoConfig,
    seeds: Sequence[int],
    model: Any | None = None,
    log: Callable[[str], None] = print,
    progress: Callable[[int, str], Any] | None = None,
) -> tuple[list[Row], list[Claim], dict[str, Any]]:
    """Train or take ``model``, evaluate, time; rows, claims and the manifest config."""
    torch.set_num_threads(1)
    task = config.task
    if model is None:
        steps = sum(p.steps for p in config.phases)
        log(f"training (or loading from the cache) the block-diffusion LM: {steps} steps")
        if progress is not None:
            with progress(steps, "training") as bar:
                model = pretrained(config.spec, task, config.phases, 0,
                                   progress=lambda loss: bar.advance(loss=loss))  # fmt: skip
        else:
            model = pretrained(config.spec, task, config.phases, 0)
    elif int(model.config.vocab_size) < task.vocab_size:
        raise MageError(
            f"--model: vocabulary of {model.config.vocab_size} tokens is smaller than the "
            f"retrieval task's {task.vocab_size} (train one with `mage train`)"
        )
    layers = int(model.config.num_hidden_layers)
    if not 0 <= config.dense_layers < layers:
        raise MageError(
            f"dense layers: {config.dense_layers} of a {layers}-layer model leaves no layer "
            "for the sparse policies"
        )
    val_policies = ("exact", "random")
    total = len(config.eval_lengths) * (
        len(seeds) * len(POLICIES) + len(config.validation_seeds) * len(val_policies)
    )
    log(
        f"premises on validation seeds {list(config.validation_seeds)}, then decoding "
        f"{config.sequences} sequences x {len(seeds)} seeds x {len(POLICIES)} policies"
    )
    if progress is not None:
        with progress(total, "decoding") as bar:
            rows = evaluate(model, task, config, config.validation_seeds, val_policies,
                            advance=bar.advance, tag="val:")  # fmt: skip
            rows += evaluate(model, task, config, seeds, advance=bar.advance)
    else:
        rows = evaluate(model, task, config, config.validation_seeds, val_policies, tag="val:")
        rows += evaluate(model, task, config, seeds)
    shape, steps = config.timing_shape, config.timing_steps
    for length in config.timing_lengths:
        log(f"timing one block at L = {length} (T = {steps}, k = {TIMING_K})")
        split = f"L={length},T={steps}"
        cmp = bench_block(shape, length, steps, TIMING_K, config.repeats, seed=seeds[0])
        rows += cmp.rows(split=split)
        rows += cost_rows(length, steps, TIMING_K, shape, split, ("mage", "quest"))
    claims = claims_from_rows(rows, config, task.chance)
    manifest = {
        "model_spec": asdict(config.spec),  # not "model": that key is the --model argument
        "task": asdict(task),
        "phases": [asdict(p) for p in config.phases],
        "eval_lengths": list(config.eval_lengths),
        "claim_length": config.claim_length,
        "sequences_per_seed": config.sequences,
        "budget": "k = L/16 (4 sinks + 16-token window included)",
        "validation_seeds": list(config.validation_seeds),
        "timing": {**asdict(config.timing_shape), "lengths": list(config.timing_lengths),
                   "steps": config.timing_steps, "k": TIMING_K, "repeats": config.repeats},
        "training_seed": 0,
    }  # fmt: skip
    return rows, claims, manifest
