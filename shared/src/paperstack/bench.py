"""Bench statistics every package's ``bench`` uses: interleaved repeats, medians, a check.

Why this module exists: a bench that times each system in its own block of calls, then reports
the *mean of per-repeat ratios* over three to ten calls, is ruled by one outlier (a quick numuon
bench read 13.75x as a mean and 3.69x as a median; a mosa profile at K = 1 read 118.8x and 1.2x),
and one that runs system A to completion before system B measures the machine's drift as much as
the systems (mosa read "MOSA plus token-KL cheaper than MOSA alone"). So here:

- every system is warmed up first, then timed **interleaved**: each repeat calls every system
  once, in an order shuffled by ``seed``, so drift and noise neighbours fall on all alike;
- the per-repeat speed-up of system ``s`` over the baseline ``b`` is ``r_i = t_b,i / t_s,i``
  (both measured in the same repeat, so the pair shares the machine's state), and the bench
  reports the **median** of the ``r_i`` with a distribution-free 95% interval from order
  statistics: ``[r_(l), r_(n-l+1)]`` with ``l`` the largest integer such that
  ``P(Bin(n, 1/2) < l) <= 0.025``. One outlier moves neither the median nor the interval's ends
  by more than one order statistic, and no bootstrap seed can move it at all;
- each system's output is compared with the baseline's **in the same run**, on the same input
  (bit-exact, or a stated absolute tolerance), and the difference is a row, so a fast wrong
  kernel cannot pass as a speed-up;
- the number of threads is set and recorded (``set_threads``).

Typical use inside a package's ``bench`` function::

    from paperstack.bench import compare_speed, set_threads

    set_threads(2)
    cmp = compare_speed({"bf16": dense, "nf12": fused}, baseline="bf16", repeats=15,
                        warmup=2, check="exact")
    rows = cmp.rows(split="4096x4096")
    claims = [cmp.correctness_claim("nf12", rows), cmp.speedup_claim(
        "nf12_gemv_1_21x", "fused GEMV >= 1.21x cuBLAS", "nf12", at_least=1.21, rows=rows)]
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from paperstack.errors import PaperstackError
from paperstack.records import Claim, Row

__all__ = [
    "SpeedComparison",
    "add_repeats_argument",
    "compare_speed",
    "max_abs_diff",
    "median_ci",
    "repeats_for",
    "set_threads",
]

Check = Literal["exact"] | float | Callable[[Any, Any], float] | None

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def add_repeats_argument(
    parser: Any, *, default: int = 9, quick: int = 6, what: str = "rounds"
) -> None:
    """A bench's ``--repeats N`` flag: interleaved timed rounds, unset meaning ``default``
    (``quick`` with ``--quick``; 6 is the fewest whose order-statistic 95% interval exists)."""
    from paperstack.contract import positive_int

    parser.add_argument(
        "--repeats", type=positive_int, default=None, metavar="N",
        help=f"interleaved timed {what} (default {default}, {quick} with --quick: >= 6 for a "
        "95%% interval)",
    )  # fmt: skip


def repeats_for(run: Any, *, default: int = 9, quick: int = 6) -> int:
    """The rounds a run asked for with :func:`add_repeats_argument` (an explicit value wins)."""
    given = getattr(run.args, "repeats", None)
    return int(given) if given else (quick if run.quick else default)


def set_threads(n: int | None = None) -> int:
    """Fix the number of CPU threads (torch's intra-op pool and the BLAS libraries' variables).

    ``None`` takes the CPUs this process may run on. Returns the number set, to be recorded with
    the bench's rows: a CPU timing means little without it.
    """
    if n is None:
        try:
            n = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            n = os.cpu_count() or 1
    if n < 1:
        raise PaperstackError(f"threads: must be >= 1, got {n}")
    for var in _THREAD_VARS:
        os.environ[var] = str(n)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is optional for the core
        return n
    torch.set_num_threads(n)
    return n


def median_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, tuple[float, float]]:
    """The median and its distribution-free interval from order statistics.

    With ``n`` sorted values ``x_(1) <= ... <= x_(n)``, ``[x_(l), x_(n-l+1)]`` covers the true
    median with probability ``1 - 2 P(Bin(n, 1/2) < l)``; ``l`` is the largest that keeps this at
    least ``level``. Below six values no such ``l`` exists at 95%, and the interval is the whole
    range ``[min, max]`` (coverage ``1 - 2^(1-n)``): a bench should take at least six repeats.
    """
    xs = sorted(float(v) for v in values)
    if not xs:
        raise PaperstackError("median_ci: no values")
    if not all(math.isfinite(x) for x in xs):
        raise PaperstackError("median_ci: every value must be a finite number")
    n = len(xs)
    alpha = (1.0 - level) / 2.0
    cdf, low = 0.0, 0  # cdf = P(Bin(n, 1/2) <= low - 1)
    for k in range(n + 1):
        p = math.comb(n, k) / 2.0**n
        if cdf + p > alpha:
            break
        cdf += p
        low = k + 1
    med = statistics.median(xs)
    if low < 1:
        return med, (xs[0], xs[-1])
    return med, (xs[low - 1], xs[n - low])


def max_abs_diff(out: Any, ref: Any) -> float:
    """The largest absolute difference between two outputs (tensors, arrays, numbers, or lists,
    tuples and dicts of them). Shapes, dtypes or structure that differ are an error (the
    comparison is meaningless, not large); NaN where the reference has none is ``inf``."""
    if isinstance(ref, Mapping):
        if not isinstance(out, Mapping) or set(out) != set(ref):
            raise PaperstackError("output check: the outputs have different keys")
        return max((max_abs_diff(out[k], ref[k]) for k in ref), default=0.0)
    if isinstance(ref, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(out) != len(ref):
            raise PaperstackError("output check: the outputs have different lengths")
        return max((max_abs_diff(o, r) for o, r in zip(out, ref, strict=True)), default=0.0)
    if isinstance(ref, (str, bytes, bool)) or ref is None:
        # Non-numeric leaves (names, labels, flags) agree or they do not: 0 or inf.
        return 0.0 if type(out) is type(ref) and out == ref else math.inf
    if isinstance(ref, (int, float)) and isinstance(out, (int, float)):
        d = abs(float(out) - float(ref))
        return d if math.isfinite(d) else (0.0 if out == ref else math.inf)
    import numpy as np

    a, b = _as_array(out), _as_array(ref)
    if a.shape != b.shape:
        raise PaperstackError(
            f"output check: shape {a.shape} differs from the baseline's {b.shape}"
        )
    if a.size == 0:
        return 0.0
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == bool) or not (
        np.issubdtype(b.dtype, np.number) or b.dtype == bool
    ):
        return 0.0 if a.dtype == b.dtype and bool(np.all(a == b)) else math.inf
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(b64)
    diff = np.where(both_nan, 0.0, np.abs(a64 - b64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    same_inf = np.isinf(a64) & np.isinf(b64) & (a64 == b64)
    diff = np.where(same_inf, 0.0, diff)
    return float(diff.max())


def _as_array(x: Any) -> Any:
    import numpy as np

    if hasattr(x, "detach"):  # a torch tensor, on any device and in any float type
        x = x.detach().to("cpu")
        if not x.dtype.is_floating_point and not x.dtype.is_complex:
            return x.numpy()
        return x.float().numpy()
    return np.asarray(x)


def _bit_equal(out: Any, ref: Any) -> bool:
    if hasattr(ref, "detach") and hasattr(out, "detach"):
        import torch

        return bool(out.dtype == ref.dtype and out.shape == ref.shape and torch.equal(out, ref))
    return max_abs_diff(out, ref) == 0.0


@dataclasses.dataclass(frozen=True)
class SpeedComparison:
    """Interleaved timings of several systems against one baseline, and their output check.

    ``times[s]`` are seconds per call of system ``s``, one per repeat, index-aligned across
    systems (the same repeat); ``diff[s]`` is the largest absolute difference of ``s``'s output
    from the baseline's (``0.0`` for bit-identical), ``tolerance`` what the check allows.
    """

    baseline: str
    times: dict[str, list[float]]
    diff: dict[str, float]
    tolerance: float | None
    threads: int | None
    warmup: int
    number: int
    seed: int
    orders: list[list[str]]

    @property
    def repeats(self) -> int:
        return len(self.times[self.baseline])

    def ratios(self, system: str) -> list[float]:
        """Per-repeat speed-ups ``t_baseline,i / t_system,i`` (> 1: ``system`` is faster)."""
        base = self.times[self.baseline]
        return [b / s for b, s in zip(base, self.times[system], strict=True)]

    def speedup(self, system: str) -> tuple[float, tuple[float, float]]:
        """The median per-repeat speed-up and its order-statistic 95% interval."""
        return median_ci(self.ratios(system))

    def rows(self, split: str | None = None, *, prefix: str = "") -> list[Row]:
        """``time_ms`` of every system (median, interval), ``speedup_vs_<baseline>`` and
        ``max_abs_diff_vs_<baseline>`` of every other system; names get ``prefix``."""
        out: list[Row] = []
        n = self.repeats
        for name, ts in self.times.items():
            med, (lo, hi) = median_ci([t * 1e3 for t in ts])
            out.append(
                Row(
                    system=name,
                    metric=f"{prefix}time_ms",
                    value=med,
                    ci95=(lo, hi),
                    n=n,
                    split=split,
                    unit="ms",
                )
            )
        for name in self.times:
            if name == self.baseline:
                continue
            med, (lo, hi) = self.speedup(name)
            out.append(
                Row(
                    system=name,
                    metric=f"{prefix}speedup_vs_{self.baseline}",
                    value=med,
                    ci95=(lo, hi),
                    n=n,
                    split=split,
                    unit="x",
                )
            )
            if self.tolerance is None:
                continue
            d = self.diff[name]
            if math.isfinite(d):
                out.append(
                    Row(
                        system=name,
                        metric=f"{prefix}max_abs_diff_vs_{self.baseline}",
                        value=d,
                        n=1,
                        split=split,
                    )
                )
            ok = int(self.matches(name))
            out.append(Row.proportion(name, f"{prefix}matches_{self.baseline}", ok, 1, split=split))
        return out

    def pair_rows(
        self, pairs: Mapping[str, str], split: str | None = None, *, prefix: str = ""
    ) -> list[Row]:
        """``time_ratio_vs_<control>`` of each ``system -> control`` pair: the median of the
        per-repeat ``t_system,i / t_control,i`` (> 1: ``system`` is slower) with its interval.

        For comparisons where a system has its own control beside the common baseline (a method
        in bf16 against the reference in bf16, the same in fp32): the repeats are paired, as for
        :meth:`rows`. A pair naming a system that was not timed is skipped, so one mapping serves
        runs that time a subset.
        """
        out: list[Row] = []
        for system, control in pairs.items():
            if system not in self.times or control not in self.times:
                continue
            ratios = [s / c for s, c in zip(self.times[system], self.times[control], strict=True)]
            med, (lo, hi) = median_ci(ratios)
            out.append(
                Row(
                    system=system,
                    metric=f"{prefix}time_ratio_vs_{control}",
                    value=med,
                    ci95=(lo, hi),
                    n=len(ratios),
                    split=split,
                    unit="x",
                )
            )
        return out

    def matches(self, system: str) -> bool:
        """Whether ``system``'s output was within the tolerance of the baseline's."""
        if self.tolerance is None:
            raise PaperstackError("bench: the outputs were not checked (check=None)")
        d = self.diff[system]
        return math.isfinite(d) and d <= self.tolerance

    def speedup_claim(
        self,
        id: str,
        statement: str,
        system: str,
        *,
        at_least: float,
        rows: Sequence[Row],
        split: str | None = None,
        prefix: str = "",
        requires: Sequence[Claim] = (),
    ) -> Claim:
        """Held when the whole 95% interval of the median speed-up is >= ``at_least`` (the
        paper's number, not 1.0), not held when the whole interval is below it."""
        return Claim.compare(
            id,
            statement,
            rows,
            (system, f"{prefix}speedup_vs_{self.baseline}", split),
            "ge",
            float(at_least),
            requires=requires,
        )

    def correctness_claim(
        self,
        system: str,
        rows: Sequence[Row],
        *,
        split: str | None = None,
        prefix: str = "",
        id: str | None = None,
        statement: str | None = None,
    ) -> Claim:
        """An exact claim that ``system``'s output is within the tolerance of the baseline's
        (bit-identical when the check was ``"exact"``), judged on the ``matches_<baseline>``
        row (a non-finite difference, NaN where the baseline has a number, does not match).
        ``statement`` says what a callable check compares when that is not the whole output."""
        if self.tolerance is None:
            raise PaperstackError("bench: the outputs were not checked (check=None)")
        tol = self.tolerance
        what = "bit-identical to" if tol == 0.0 else f"within {tol:g} of"
        return Claim.compare(
            id or f"{system}{'_' + split if split else ''}_matches_{self.baseline}",
            statement or f"{system}'s output is {what} {self.baseline}'s on the same input",
            rows,
            (system, f"{prefix}matches_{self.baseline}", split),
            "ge",
            1.0,
            exact=True,
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything measured (for a report's config): per-repeat seconds, order, check."""
        return {
            "baseline": self.baseline,
            "times_s": self.times,
            "max_abs_diff": self.diff,
            "tolerance": self.tolerance,
            "threads": self.threads,
            "warmup": self.warmup,
            "number": self.number,
            "seed": self.seed,
            "repeats": self.repeats,
        }


def compare_speed(
    systems: Mapping[str, Callable[[], Any]],
    *,
    baseline: str,
    repeats: int = 15,
    warmup: int = 2,
    number: int = 1,
    check: Check = "exact",
    sync: Callable[[], Any] | None = None,
    seed: int = 0,
    threads: int | None = None,
    tolerance: float = 0.0,
    budget_s: float | None = None,
    min_repeats: int = 6,
) -> SpeedComparison:
    """Time ``systems`` (zero-argument callables returning their output) against ``baseline``.

    ``warmup`` untimed rounds first (the first one also checks each output against the
    baseline's: ``check="exact"`` bit-for-bit, a float an absolute tolerance, a callable
    ``f(out, ref) -> difference`` judged against ``tolerance``, ``None`` no check); then
    ``repeats`` rounds, each calling every system ``number`` times in a shuffled order, timed with
    ``time.perf_counter`` around the calls and ``sync()`` (``torch.cuda.synchronize`` on a GPU).
    ``budget_s`` stops after the round that crosses it, but not before ``min_repeats`` rounds.
    ``threads``: when given, :func:`set_threads` first.
    """
    if baseline not in systems:
        raise PaperstackError(f"bench: baseline {baseline!r} is not among {sorted(systems)}")
    if len(systems) < 2:
        raise PaperstackError("bench: compare at least two systems")
    if repeats < 1 or warmup < 1 or number < 1:
        raise PaperstackError("bench: repeats, warmup and number must be >= 1")
    if threads is not None:
        set_threads(threads)
    names = list(systems)
    allowed: float | None
    if check is None:
        allowed = None
    elif check == "exact":
        allowed = 0.0
    elif isinstance(check, (int, float)):
        allowed = float(check)
    else:
        allowed = float(tolerance)
    if allowed is not None and not (math.isfinite(allowed) and allowed >= 0):
        raise PaperstackError(f"bench: tolerance must be a finite number >= 0, got {allowed}")

    diff: dict[str, float] = {}
    for round_ in range(warmup):
        outputs = {}
        for name in names:
            outputs[name] = systems[name]()
            if sync is not None:
                sync()
        if round_ == 0:
            ref = outputs[baseline]
            for name in names:
                if name == baseline:
                    continue
                if check is None:
                    diff[name] = math.nan
                elif check == "exact":
                    exact = _bit_equal(outputs[name], ref)
                    diff[name] = 0.0 if exact else max(max_abs_diff(outputs[name], ref), 1e-300)
                elif callable(check):
                    diff[name] = float(check(outputs[name], ref))
                else:
                    diff[name] = max_abs_diff(outputs[name], ref)
        del outputs

    rng = random.Random(seed)
    times: dict[str, list[float]] = {n: [] for n in names}
    orders: list[list[str]] = []
    started = time.perf_counter()
    for i in range(repeats):
        order = names[:]
        rng.shuffle(order)
        orders.append(order)
        for name in order:
            fn = systems[name]
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            if sync is not None:
                sync()
            times[name].append((time.perf_counter() - t0) / number)
        spent = time.perf_counter() - started
        if budget_s is not None and spent >= budget_s and i + 1 >= min(min_repeats, repeats):
            break
    if any(t <= 0 for ts in times.values() for t in ts):
        raise PaperstackError("bench: a call took no measurable time; raise `number`")
    return SpeedComparison(
        baseline=baseline,
        times=times,
        diff={k: v for k, v in diff.items()},
        tolerance=allowed,
        threads=threads,
        warmup=warmup,
        number=number,
        seed=seed,
        orders=orders,
    )
