"""KV-cache capacity freed by NF12: the paper's "4.5x on Qwen3-32B" is a memory argument.

On a card of ``card_bytes``, a server keeps ``utilization * card_bytes`` for the model and its
KV cache (vLLM's ``gpu_memory_utilization``, 0.9 by default) and gives the KV cache what the
weights leave, less ``activation_bytes`` (the forward's peak, CUDA graphs)::

    kv_bytes(bits) = utilization * card_bytes - activation_bytes - weight_bytes(bits)
    tokens(bits)   = kv_bytes(bits) / (2 * layers * kv_heads * head_dim * kv_dtype_bytes)

``weight_bytes`` counts the linear layers at NF12's bits per weight (escapes, padding and
headers included: 12.0 to 12.05 measured) and everything else (embeddings, norms) at 16 bits,
because NF12 converts linear layers only. The ratio ``tokens(nf12) / tokens(bf16)`` depends
steeply on how much the BF16 model leaves free, so it is reported as a function of the
reserve, not as one number.
"""

from __future__ import annotations

from dataclasses import dataclass

from nf12.errors import Nf12Error

__all__ = ["QWEN3_32B", "DenseShape", "kv_capacity"]

GB = 10**9


@dataclass(frozen=True)
class DenseShape:
    """What the capacity needs of a dense decoder (the fields of its ``config.json``)."""

    name: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @property
    def linear_params(self) -> int:
        """Weights of every linear layer (q, k, v, o, gate, up, down; lm_head when untied)."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        head = 0 if self.tied else self.vocab * self.hidden
        return self.layers * (attn + mlp) + head

    @property
    def other_params(self) -> int:
        """Weights NF12 leaves in BF16: the token embedding and the norms."""
        norms = self.layers * (2 * self.hidden + 2 * self.head_dim) + self.hidden
        return self.vocab * self.hidden + norms

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


#: Qwen3-32B's config.json (64 layers, GQA 64/8 heads of 128, untied lm_head).
QWEN3_32B = DenseShape(
    name="Qwen3-32B", layers=64, hidden=5120, intermediate=25600, heads=64, kv_heads=8,
    head_dim=128, vocab=151936, tied=False,
)  # fmt: skip


def kv_capacity(
    shape: DenseShape,
    *,
    bits_per_weight: float,
    card_bytes: float = 80 * GB,
    utilization: float = 0.9,
    activation_bytes: float = 0.0,
) -> dict[str, float]:
    """Weight bytes, KV-cache bytes and tokens for BF16 and NF12, and the capacity ratio.

    A BF16 model that does not fit leaves no KV cache: the ratio is then infinite, which says
    "NF12 serves where BF16 cannot" and is reported as such, not as a speed-up.
    """
    if not 0 < utilization <= 1:
        raise Nf12Error(f"utilization {utilization}: must be in (0, 1]")
    if not 8 <= bits_per_weight <= 16:
        raise Nf12Error(f"bits_per_weight {bits_per_weight}: must be in [8, 16]")
    budget = utilization * card_bytes - activation_bytes
    other = 2.0 * shape.other_params
    weights = {
        "bf16": 2.0 * shape.linear_params + other,
        "nf12": bits_per_weight / 8 * shape.linear_params + other,
    }
    per_token = shape.kv_bytes_per_token()
    out: dict[str, float] = {}
    for key, w in weights.items():
        kv = max(0.0, budget - w)
        out[f"{key}_weight_bytes"] = w
        out[f"{key}_kv_bytes"] = kv
        out[f"{key}_kv_tokens"] = kv // per_token
    bf16 = out["bf16_kv_tokens"]
    out["capacity_ratio"] = out["nf12_kv_tokens"] / bf16 if bf16 else float("inf")
    return out
