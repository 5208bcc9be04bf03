"""``saga bench``: decode-step, selection and end-to-end decode time, as paired ratios.

Three measurements, each with every system timed back to back inside a repeat (so a ratio is
paired by repeat, and a loaded machine slows both sides of it alike):

1. **Decode attention step** of one layer (:mod:`saga_attention.timing`) at each context, with
   SAGA + Atop-N at every ``H_k`` of the sweep: ratios to the best dense GQA path.
2. **Selection alone**: Atop-N against ``torch.topk`` on the ``[H_k, L]`` score rows of one
   SAGA step (CUDA adds the split-select triton kernel). Selection is reported on its own
   because at long context it is a large share of a sparse step.
3. **End to end**: one decode step of a whole model (embedding, every layer, the LM head) with
   a static KV cache holding ``L`` random tokens: the demo's tiny model and Llama-1B-shaped
   layers (``hidden 2048``, ``H_q 32``, GQA ``H_kv 8``, ``d 64``, MLP 8192, vocab 32000; the
   first ``e2e_layers`` of its 16, so that the caches fit a shared machine), GQA dense, GQA +
   Atop-N and SAGA (``H_k = 2``) + Atop-N; tokens/s and the ratio to dense GQA.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from paperstack.progress import Progress
from paperstack.records import Claim, Row
from saga_attention.heads import HeadLayout, SagaError
from saga_attention.selection import AtopConfig, atop_n
from saga_attention.timing import DecodeShape, time_calls, time_decode

__all__ = ["BenchConfig", "E2EShape", "run_bench"]


@dataclass(frozen=True)
class E2EShape:
    """A whole model for the end-to-end decode timing."""

    name: str
    hidden_size: int
    intermediate_size: int
    layers: int
    query_heads: int
    kv_heads: int
    saga_key_heads: int
    vocab_size: int
    top_n: int


TINY = E2EShape("tiny", 64, 128, 2, 8, 4, 2, 363, 32)
LLAMA_1B = E2EShape("llama-1b-layers", 2048, 8192, 2, 32, 8, 2, 32000, 64)


@dataclass(frozen=True)
class BenchConfig:
    """What ``saga bench`` measures."""

    device: str
    contexts: tuple[int, ...]
    key_heads: tuple[int, ...]
    repeats: int
    e2e_contexts: tuple[int, ...]
    e2e_models: tuple[E2EShape, ...]
    e2e_repeats: int
    shape: DecodeShape = field(default_factory=DecodeShape)

    @classmethod
    def for_run(
        cls,
        device: str,
        quick: bool,
        repeats: int | None,
        contexts: Sequence[int] | None,
        key_heads: Sequence[int],
        e2e_contexts: Sequence[int] | None,
    ) -> BenchConfig:
        cuda = device.startswith("cuda")
        if contexts is None:
            if cuda:
                contexts = (8192, 32768, 131072) if quick else (8192, 16384, 32768, 65536, 131072)
            else:
                contexts = (1024, 4096) if quick else (4096, 8192, 16384, 32768)
        shape = DecodeShape()
        for h in key_heads:
            if shape.query_heads % h:
                raise SagaError(f"--key-heads {h}: does not divide H_q={shape.query_heads}")
        for length in contexts:
            if length < shape.top_n:
                raise SagaError(f"--contexts {length}: smaller than top_n={shape.top_n}")
        if e2e_contexts is None:
            e2e_contexts = () if cuda else ((512,) if quick else (16384, 65536))
        models = (TINY,) if quick else (TINY, LLAMA_1B)
        for length in e2e_contexts:
            if length <= max(m.top_n for m in models) * 4:
                raise SagaError(
                    f"--e2e-contexts {length}: needs more than {max(m.top_n for m in models) * 4}"
                    " tokens (beyond Atop-N's exact zone)"
                )
        return cls(
            device=device,
            contexts=tuple(contexts),
            key_heads=tuple(key_heads),
            repeats=repeats or (3 if quick else 10),
            e2e_contexts=tuple(e2e_contexts),
            e2e_models=models,
            e2e_repeats=3 if quick else 5,
            shape=shape,
        )

    def describe(self) -> str:
        cuda = self.device.startswith("cuda")
        how = (
            "bf16 caches, triton.testing.do_bench medians"
            if cuda
            else "fp32 caches, one torch thread, a shared 2-core CPU"
        )
        return (
            f"Device {self.device} ({how}). Decode attention step: one layer, batch 1, "
            f"H_q={self.shape.query_heads}, d={self.shape.head_dim}, GQA H_kv="
            f"{self.shape.gqa_kv_heads}, SAGA H_v={self.shape.saga_value_heads} with H_k in "
            f"{self.shape.saga_key_heads} and {', '.join(map(str, self.key_heads))}, "
            f"N={self.shape.top_n}, contexts {', '.join(map(str, self.contexts))}, "
            f"{self.repeats} repeats; speedups are per-repeat ratios to the fastest dense GQA "
            "path of that repeat. Selection: Atop-N vs torch.topk on one SAGA step's score "
            "rows. End to end: one decode step of a whole model with a static cache of L "
            f"random tokens ({', '.join(m.name for m in self.e2e_models)}; contexts "
            f"{', '.join(map(str, self.e2e_contexts)) or 'none'}). Bytes: analytic cache reads "
            "per step (bf16)."
        )


def _split(length: int) -> str:
    return f"L={length}"


def _selection_rows(config: BenchConfig, seed: int) -> list[Row]:
    """Atop-N vs ``torch.topk`` on ``[H_k, L]`` score rows (selection alone)."""
    g = torch.Generator().manual_seed(seed)
    cuda = config.device.startswith("cuda")
    n, hk = config.shape.top_n, config.shape.saga_key_heads
    atop = AtopConfig()
    rows: list[Row] = []
    for length in config.contexts:
        scores = torch.randn(hk, length, generator=g).to(config.device)
        calls: dict[str, Callable[[], object]] = {
            "topk": functools.partial(torch.topk, scores, n, dim=-1),
            "atop": functools.partial(atop_n, scores, n, config=atop),
        }
        if cuda:
            from saga_attention.kernels import atop_select_triton

            calls["atop-triton"] = functools.partial(atop_select_triton, scores, n, "atop", atop)
        times = time_calls(calls, config.repeats, cuda)
        for name, t in times.items():
            ms = {f"r{i}": x * 1e3 for i, x in enumerate(t)}
            rows.append(Row.from_items(name, "select_ms", ms, split=_split(length), unit="ms"))
            if name != "topk":
                per = {
                    f"r{i}": b / x for i, (b, x) in enumerate(zip(times["topk"], t, strict=True))
                }
                rows.append(
                    Row.from_items(name, "speedup_vs_topk", per, split=_split(length), unit="x")
                )
    return rows


def _e2e_models(shape: E2EShape, max_len: int, device: str) -> dict[str, Any]:
    """GQA (stock ``LlamaForCausalLM``) and SAGA of one shape, random init, eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from saga_attention.modeling import SagaConfig, SagaForCausalLM, enable_saga_attention

    common: dict[str, Any] = {
        "vocab_size": shape.vocab_size,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.query_heads,
        "num_key_value_heads": shape.kv_heads,
        "max_position_embeddings": max_len + 8,
        "tie_word_embeddings": True,
    }
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        gqa = LlamaForCausalLM(LlamaConfig(**common)).eval().to(device)
        saga = SagaForCausalLM(SagaConfig(num_key_heads=shape.saga_key_heads, **common))
        saga = saga.eval().to(device)
    enable_saga_attention(gqa, "dense")
    enable_saga_attention(saga, "atop", shape.top_n)
    return {"gqa": gqa, "saga": saga}


def _filled_cache(model: Any, length: int, g: torch.Generator, device: str) -> Any:
    """A static cache of ``length + 1`` slots whose first ``length`` hold random keys/values."""
    from saga_attention.modeling import static_cache

    cfg = model.config
    d = cfg.hidden_size // cfg.num_attention_heads
    hk = getattr(cfg, "num_key_heads", None) or cfg.num_key_value_heads
    hv = cfg.num_key_value_heads
    cache = static_cache(cfg, length + 1)
    layers: list[Any] = list(cache.layers)
    for layer in layers:
        k = torch.randn(1, hk, 1, d, generator=g).to(device)
        v = torch.randn(1, hv, 1, d, generator=g).to(device)
        layer.lazy_initialization(k, v)
        layer.keys[:, :, :length].normal_()
        layer.values[:, :, :length].normal_()
        layer.cumulative_length.fill_(length)
    return cache


def _decode_step(
    model: Any, cache: Any, token: torch.Tensor, mode: str, shape: E2EShape, length: int
) -> Callable[[], object]:
    """One whole-model decode step at ``length`` cached tokens under attention ``mode``."""
    from saga_attention.modeling import cache_kwargs, enable_saga_attention

    def run() -> object:
        enable_saga_attention(model, mode, shape.top_n)
        with torch.no_grad():
            out = model(token, **cache_kwargs(model, cache), use_cache=True).logits
        for layer in cache.layers:  # the step wrote slot L: rewind to L tokens
            layer.cumulative_length.fill_(length)
        return out

    return run


def _e2e_rows(config: BenchConfig, seed: int, log: Callable[[str], None]) -> list[Row]:
    """Tokens/s of one whole-model decode step, GQA dense vs GQA + Atop-N vs SAGA + Atop-N."""
    rows: list[Row] = []
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    device = config.device
    for shape in config.e2e_models:
        models = _e2e_models(shape, max(config.e2e_contexts), device)
        for length in config.e2e_contexts:
            log(f"end-to-end decode: {shape.name} at L={length}")
            caches = {name: _filled_cache(m, length, g, device) for name, m in models.items()}
            token = torch.tensor([[5]], device=device)
            calls = {
                "gqa-dense": _decode_step(models["gqa"], caches["gqa"], token, "dense", shape,
                                          length),
                "gqa-atop": _decode_step(models["gqa"], caches["gqa"], token, "atop", shape,
                                         length),
                "saga-atop": _decode_step(models["saga"], caches["saga"], token, "atop", shape,
                                          length),
            }  # fmt: skip
            times = time_calls(calls, config.e2e_repeats, device.startswith("cuda"))
            split = f"{shape.name}:L={length}"
            for name, t in times.items():
                tps = {f"r{i}": 1.0 / x for i, x in enumerate(t)}
                rows.append(Row.from_items(name, "tokens_per_s", tps, split=split, unit="tok/s"))
                if name != "gqa-dense":
                    per = {
                        f"r{i}": b / x
                        for i, (b, x) in enumerate(zip(times["gqa-dense"], t, strict=True))
                    }
                    rows.append(
                        Row.from_items(name, "e2e_speedup_vs_gqa_dense", per, split=split,
                                       unit="x")
                    )  # fmt: skip
            del caches
    return rows


def _bytes_rows(config: BenchConfig) -> list[Row]:
    s = config.shape
    hq, d, hv = s.query_heads, s.head_dim, s.saga_value_heads
    layouts: list[tuple[str, HeadLayout, int | None]] = [
        ("gqa-dense", HeadLayout(hq, s.gqa_kv_heads, s.gqa_kv_heads, d), None),
        ("gqa-atop", HeadLayout(hq, s.gqa_kv_heads, s.gqa_kv_heads, d), s.top_n),
        ("saga-dense", HeadLayout(hq, s.saga_key_heads, hv, d), None),
        ("saga-atop", HeadLayout(hq, s.saga_key_heads, hv, d), s.top_n),
    ]
    for h in config.key_heads:
        layouts.append((f"saga-atop-hk{h}", HeadLayout(hq, h, hv, d), s.top_n))
    rows = []
    for length in config.contexts:
        for name, layout, top in layouts:
            rows.append(
                Row(system=name, metric="bytes_per_step", value=layout.decode_bytes(length, top),
                    split=_split(length), unit="bytes (bf16)")
            )  # fmt: skip
    return rows


def run_bench(
    config: BenchConfig,
    seed: int,
    log: Callable[[str], None],
    progress: Callable[[int | None, str], Progress],
) -> tuple[list[Row], list[Claim], dict[str, Any], str]:
    """Everything ``saga bench`` measures; returns rows, claims, notes and a one-line summary."""
    start = time.perf_counter()
    stages = 3 if config.e2e_contexts else 2
    rows: list[Row] = []
    with progress(stages, "bench") as bar:
        timing = time_decode(
            config.contexts, config.repeats, config.shape, seed=seed,
            key_heads=config.key_heads, progress=log, device=config.device,
        )  # fmt: skip
        rows += timing.rows(ratios={"speedup_vs_gqa_dense": "gqa-dense"})
        rows += _bytes_rows(config)
        bar.advance()
        log("selection alone: Atop-N vs torch.topk")
        rows += _selection_rows(config, seed)
        bar.advance()
        if config.e2e_contexts:
            rows += _e2e_rows(config, seed, log)
            bar.advance()
    longest = max(config.contexts)
    claims = [
        Claim.compare(
            "layer_decode_saga_faster_than_dense_gqa",
            f"at {longest} tokens the SAGA + Atop-N decode attention step is more than 2x "
            "faster than the fastest dense GQA path",
            rows,
            ("saga-atop", "speedup_vs_gqa_dense", _split(longest)),
            "gt",
            2.0,
        ),
        Claim.compare(
            "atopn_selection_at_least_as_fast_as_topk",
            f"at {longest} tokens Atop-N selection is at least as fast as torch.topk",
            rows,
            ("atop", "speedup_vs_topk", _split(longest)),
            "ge",
            1.0,
        ),
    ]
    if config.e2e_contexts:
        biggest = config.e2e_models[-1]
        split = f"{biggest.name}:L={max(config.e2e_contexts)}"
        claims.append(
            Claim.compare(
                "e2e_decode_saga_faster_than_dense_gqa",
                f"end to end ({biggest.name}, {max(config.e2e_contexts)} tokens) a SAGA + "
                "Atop-N decode step is faster than dense GQA's",
                rows,
                ("saga-atop", "e2e_speedup_vs_gqa_dense", split),
                "gt",
                1.0,
            )
        )
    notes = {"bench": asdict(replace(config)), "seconds": round(time.perf_counter() - start, 1)}
    best = next(
        r for r in rows
        if r.system == "saga-atop" and r.metric == "speedup_vs_gqa_dense"
        and r.split == _split(longest)
    )  # fmt: skip
    summary = f"SAGA + Atop-N step {best.value:.2f}x dense GQA at {longest} tokens"
    return rows, claims, notes, summary
