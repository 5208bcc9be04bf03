"""``ra2 evaluate``: the open-unlearning metrics of :mod:`ra2_unlearn.metrics` on a user's model
and files (WMDP/MUSE-style multiple-choice JSONL, or a raw-text corpus).

Multiple choice: the answer is the right letter, the perturbed answers of the truth ratio are
the other letters, KnowMem is the ROUGE-L recall of the greedy answer (for a letter, its
accuracy). Raw text: VerbMem on the passages. Both: the four membership-inference scores of
the forget data against ``holdout`` data (non-members) as AUCs, and with a retain model TOFU's
forget quality (multiple choice) and MUSE's PrivLeak.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from paperstack.tasks import Example
from ra2_unlearn import metrics

__all__ = ["evaluate_user_data"]


def _with_perturbed(examples: Sequence[Example]) -> list[Example]:
    import string

    out = []
    for e in examples:
        letters = string.ascii_uppercase[: len(e.meta["choices"])]
        wrong = [c for c in letters if c != e.answer]
        out.append(Example(e.task, e.prompt, e.answer, {**e.meta, "perturbed": wrong}))
    return out


def _scores(
    model: Any, tok: Any, forget: Sequence[Example], holdout: Sequence[Example] | None
) -> tuple[dict[str, float], np.ndarray | None]:
    out: dict[str, float] = {}
    raw = all(e.meta.get("raw") for e in forget)
    ratios = None
    if raw:
        out["verbmem"] = float(metrics.verbmem(model, tok, forget).mean())
    else:
        from ra2_unlearn.evaluate import mc_accuracy

        mc = _with_perturbed(forget)
        ratios = metrics.truth_ratios(model, tok, mc)
        out["truth_ratio"] = float(ratios.mean())
        out["mc_accuracy"] = float(mc_accuracy(model, tok, forget).mean())
        out["knowmem"] = float(metrics.knowmem(model, tok, forget).mean())
    if holdout:
        members = metrics.mia_scores(model, tok, forget)
        others = metrics.mia_scores(model, tok, holdout)
        for attack in metrics.MIA_ATTACKS:
            out[f"mia_auc_{attack}"] = metrics.mia_auc(members[attack], others[attack])
    return out, ratios


def evaluate_user_data(
    model_name: str,
    forget: Sequence[Example],
    holdout: Sequence[Example] | None = None,
    retain_model: str | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Every metric that the data allows; a JSON-ready dict (``metrics``, sizes, sources)."""
    from ra2_unlearn.trainer import load_model

    model, tok = load_model(model_name, device)
    found, ratios = _scores(model, tok, forget, holdout)
    reference: dict[str, float] = {}
    if retain_model is not None:
        ref_model, ref_tok = load_model(retain_model, device)
        reference, ref_ratios = _scores(ref_model, ref_tok, forget, holdout)
        if ratios is not None and ref_ratios is not None:
            found["forget_quality"] = metrics.forget_quality(ratios, ref_ratios)
        if "mia_auc_min_k" in found and reference.get("mia_auc_min_k", 0.0) > 0:
            auc = reference["mia_auc_min_k"]
            found["privleak"] = (found["mia_auc_min_k"] - auc) / auc
    return {
        "model": model_name,
        "retain_model": retain_model,
        "forget_items": len(forget),
        "holdout_items": len(holdout or ()),
        "metrics": found,
        "retain_model_metrics": reference,
    }
