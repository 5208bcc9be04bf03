"""Pace's per-step branch admission: slack, batch budget, externality, and the admission rule.

Engine-independent: an engine (the simulator, the vLLM plug-in) describes the step it is about to
run as a :class:`StepView` (numpy arrays, no engine objects) and gets back which candidate
branches to admit.

The rule, for the batch ``B`` already scheduled this step (decodes and prefill chunks):

1. slack of every running request ``i``: its time bank ``b_i = t0_i + τ_i·P_i − now`` (time
   ahead of its per-token pace; ``τ_i`` its per-token SLO, ``t0_i`` its first-token time,
   ``P_i`` its critical-path progress in tokens) plus one token's SLO, minus the step about to
   run::

       slack_i = τ_i + b_i / R_i − T̂(B)        (decoding; R_i = 1 by default)
       slack_i = arrival_i + TTFT_i − now − T̂(B)   (still in prefill)

   With ``R_i = 1`` this is the plain time bank ``t0_i + τ_i(P_i + 1) − now − T̂(B)``: the
   whole surplus or deficit counts against this step. ``PaceConfig(amortize=True)`` spreads it
   over the expected remaining critical-path tokens ``R_i`` instead (measured worse in the
   demo, see the README);
2. batch budget ``S = min_i slack_i`` over the requests the admission would only slow down (not
   those with pending branches, which gain from it) and not already lost (behind by more than
   ``late_tolerance`` tokens' worth of SLO, which no admission decision can save);
3. candidates ordered by benefit per unit externality: benefit = decode steps the request's
   critical path saves by one more concurrent branch, ``ℓ̂·k·(1/(w+j−1) − 1/(w+j))`` (``k``
   unfinished branches, ``w`` running, ``j``-th extra one, ``ℓ̂`` the expected branch length);
   cost = ``T̂(B ∪ {c}) − T̂(B)``;
4. admit in that order while ``E(A) = T̂(B ∪ A) − T̂(B) ≤ S`` and the KV blocks and sequence
   slots the branches need are free; stop at the first that does not fit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import N_FEATURES, LatencyModel, OnlinePredictor, as_features

__all__ = ["PaceConfig", "PaceController", "StepView", "batch_budget", "request_slack"]


@dataclass
class StepView:
    """One step as the controller sees it (all arrays aligned per request or per candidate).

    Requests in the batch: ``deadline`` (the TTFT deadline before the first token, else
    ``t0_i + τ_i·(P_i + 1)``), ``tpot`` (``τ_i``), ``bank`` (``b_i``, time ahead of pace),
    ``remaining`` (``R_i``, expected critical-path tokens still to decode, >= 1), ``decoding``
    (past the first token), ``beneficiary`` (has pending branches).
    Candidates (pending branches, grouped by request, in the request's order): ``cand_req``
    (request position in the arrays above), ``cand_rank`` (``j``, 1 for the first extra branch
    of its request), ``cand_ctx`` (context the new sequence reads), ``cand_width`` (``w``),
    ``cand_unfinished`` (``k``), ``cand_len`` (``ℓ̂``), ``cand_blocks`` (KV blocks reserved).
    """

    now: float
    base: np.ndarray
    deadline: np.ndarray
    tpot: np.ndarray
    bank: np.ndarray
    remaining: np.ndarray
    decoding: np.ndarray
    beneficiary: np.ndarray
    cand_req: np.ndarray
    cand_rank: np.ndarray
    cand_ctx: np.ndarray
    cand_width: np.ndarray
    cand_unfinished: np.ndarray
    cand_len: np.ndarray
    cand_blocks: np.ndarray
    kv_free_blocks: int
    seats_free: int
    extra_lanes: int = 0

    @property
    def n_candidates(self) -> int:
        return int(self.cand_req.size)

    def candidate_features(self) -> np.ndarray:
        """``(n, 5)`` feature increments of each candidate alone: one decode of context ``c``."""
        f = np.zeros((self.n_candidates, N_FEATURES))
        f[:, 0] = 1.0
        f[:, 1] = self.cand_ctx
        return f

    def resource_prefix(self) -> np.ndarray:
        """Mask of the longest candidate prefix whose KV blocks and sequence slots are free."""
        return self.resource_prefix_of(np.ones(self.n_candidates, dtype=bool))

    def resource_prefix_of(self, allowed: np.ndarray) -> np.ndarray:
        """Among ``allowed`` candidates (in order), those admitted before resources run out."""
        blocks = np.cumsum(np.where(allowed, self.cand_blocks, 0))
        count = np.cumsum(allowed)
        fits = ((blocks <= self.kv_free_blocks) & (count <= self.seats_free)) | ~allowed
        return _prefix(fits) & allowed


def _prefix(fits: np.ndarray) -> np.ndarray:
    """``fits`` cut at its first False: admission stops at the first candidate that fails."""
    return np.cumprod(fits).astype(bool) if fits.size else fits.astype(bool)


def request_slack(view: StepView, t_batch: float, amortize: bool = False) -> np.ndarray:
    """``slack_i``: how much longer this step may take for request ``i`` (module doc, step 1).

    ``τ_i + b_i/R_i − T̂(B)`` once decoding (``R_i = 1`` unless ``amortize``),
    ``arrival_i + TTFT_i − now − T̂(B)`` before.
    """
    spread = np.maximum(view.remaining, 1.0) if amortize else 1.0
    paced = view.tpot + view.bank / spread - t_batch
    return np.where(view.decoding, paced, view.deadline - view.now - t_batch)


def batch_budget(
    view: StepView, t_batch: float, late_tolerance: float, amortize: bool = False
) -> float:
    """``S = min_i slack_i`` over requests that admission only slows and that can still make it.

    Requests with pending branches are excluded (admission helps them); requests behind pace by
    more than ``late_tolerance·τ_i`` are excluded (lost whatever we do). With nobody to protect
    the budget is the smallest per-token SLO of the beneficiaries minus ``T̂(B)``: even a lone
    branching request should not get steps slower than its own SLO.
    """
    slack = request_slack(view, t_batch, amortize)
    protect = ~view.beneficiary & (view.bank >= -late_tolerance * view.tpot)
    if protect.any():
        return float(slack[protect].min())
    if view.beneficiary.any():
        return float(view.tpot[view.beneficiary].min() - t_batch)
    return float("inf")


@dataclass(frozen=True)
class PaceConfig:
    """Knobs of the controller (the paper gives none; these are the plausible defaults).

    ``late_tolerance``: a request behind its pace by more than this many tokens' worth of SLO no
    longer constrains the budget. ``amortize``: spread each time bank over the request's
    expected remaining tokens instead of charging it to one step. ``safety``: fraction of the
    budget used, leaving room for the predictor's error (measured noise CV ~4%).
    """

    late_tolerance: float = 20.0
    safety: float = 0.9
    online_refit: bool = True
    amortize: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.safety <= 1:
            raise PaceSchedulerError(f"pace: field 'safety' must be in (0, 1], got {self.safety}")
        if self.late_tolerance < 0:
            raise PaceSchedulerError(
                f"pace: field 'late_tolerance' must be >= 0, got {self.late_tolerance}"
            )


@dataclass
class PaceController:
    """The Pace admission rule with an (online-refitted) latency predictor.

    ``decide(view)`` returns a boolean mask over ``view``'s candidates; ``observe`` feeds back a
    measured step so the predictor is refitted online. ``decision_seconds`` keeps the wall time
    (thread CPU time) of every decision: the controller's own cost per step.
    """

    predictor: OnlinePredictor
    config: PaceConfig = field(default_factory=PaceConfig)
    decision_seconds: list[float] = field(default_factory=list)

    @classmethod
    def from_model(
        cls,
        model: LatencyModel,
        config: PaceConfig | None = None,
        prior_x: np.ndarray | None = None,
        prior_y: np.ndarray | None = None,
    ) -> PaceController:
        return cls(OnlinePredictor(model, prior_x, prior_y), config or PaceConfig())

    def decide(self, view: StepView) -> np.ndarray:
        # CPU time of the deciding thread: the controller's own cost, whatever else the machine
        # runs (wall time on a shared CPU would count other jobs' time slices)
        started = time.thread_time()
        mask = self._decide(view)
        self.decision_seconds.append(time.thread_time() - started)
        return mask

    def _decide(self, view: StepView) -> np.ndarray:
        n = view.n_candidates
        if n == 0:
            return np.zeros(0, dtype=bool)
        predict = self.predictor.predict
        base = as_features(view.base)
        t_batch = float(predict(base))
        budget = batch_budget(view, t_batch, self.config.late_tolerance, self.config.amortize)
        if budget <= 0:
            return np.zeros(n, dtype=bool)
        budget *= self.config.safety
        inc = view.candidate_features()
        cost = np.maximum(predict(base + inc) - t_batch, 1e-9)
        w = view.cand_width + view.cand_rank - 1
        benefit = view.cand_len * view.cand_unfinished * (1.0 / w - 1.0 / (w + 1))
        order = np.argsort(-benefit / cost, kind="stable")
        externality = predict(base + np.cumsum(inc[order], axis=0)) - t_batch
        blocks = np.cumsum(view.cand_blocks[order])
        fits = (
            (externality <= budget)
            & (blocks <= view.kv_free_blocks)
            & (np.arange(1, n + 1) <= view.seats_free)
        )
        mask = np.zeros(n, dtype=bool)
        mask[order[_prefix(fits)]] = True
        return mask

    def observe(self, features: np.ndarray, seconds: float) -> None:
        if self.config.online_refit:
            self.predictor.observe(features, seconds)
