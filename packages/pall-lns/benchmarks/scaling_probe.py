"""Issue #53, item 4 (first step only): one set cover instance at 10k, 100k or 1M variables,
its generation time, then one PALL run (shipped softmax-linear selector, in-process, one core)
of T seconds: when the first incumbent came, LNS iterations, the share of the loop outside
SCIP's ``optimize()``, SCIP's dual bound and the final gap to it, and this process's peak RSS.

Set cover keeps the ``xl`` shape (rows = cols / 5, about 10 non-zeros per column). One
instance per size and one run each: a feasibility probe for the full scaling curve, not the
curve. Run: ``python benchmarks/scaling_probe.py SIZE OUT [T]`` with SIZE 10k, 100k or 1m, one
process per size (so the peak RSS is that size's).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

SHAPES = {
    "10k": {"rows": 2000, "cols": 10000, "density": 0.005},
    "100k": {"rows": 20000, "cols": 100000, "density": 0.0005},
    "1m": {"rows": 200000, "cols": 1000000, "density": 0.00005},
}


def main(size: str, out: Path, T: float) -> None:
    from pall_lns import generators
    from pall_lns.lns import LnsConfig, run_lns
    from pall_lns.selectors import load_default

    out.mkdir(parents=True, exist_ok=True)
    generators.SIZES["setcover"][size] = SHAPES[size]
    t = time.perf_counter()
    g = generators.generate("setcover", size, 1000, out)
    res: dict[str, Any] = {"size": size, "shape": SHAPES[size], "time_limit_s": T,
                           "instance": g.path.name, "generate_s": time.perf_counter() - t,
                           "lp_file_mb": g.path.stat().st_size / 2**20}  # fmt: skip
    sel = load_default()
    cfg = LnsConfig(T, seed=0, background_free=False, first_grace=10 * T)
    t = time.perf_counter()
    r = run_lns(g.path, sel.ops, sel, cfg, t0=t)
    dual = r.stats["dual_bound"]
    res.update({
        "run_wall_s": time.perf_counter() - t,
        "first_incumbent_s": r.timeline[0][0] if r.timeline else None,
        "first_solution_extra_s": r.stats["first_solution_extra_s"],
        "init_end_s": r.stats["init_end_s"],
        "final": r.objective,
        "iterations": r.iterations,
        "overhead_share": r.overhead,
        "loop_s": r.loop_s,
        "dual_bound": dual,
        "final_gap_to_dual": r.stats["gap"],
        "timeline": r.timeline,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    })  # fmt: skip
    g.path.unlink()  # the model files are large; the generator seed rebuilds them
    (out / f"probe-{size}.json").write_text(json.dumps(res, indent=1))
    print(json.dumps({k: v for k, v in res.items() if k != "timeline"}))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 60.0)
