"""Issue #53, item 2: what HiGHS does on a 100k set cover that PALL's sub-MIPs do not.

One instance (``setcover-xl-s1000``), T seconds each: HiGHS with its log (the log's ``Src``
column names the heuristic behind each incumbent), plain SCIP with the time of each incumbent
and of its first LP, and PALL with the shipped selector in-process. Writes ``measure.json`` and
the HiGHS log into OUT. Run: ``python benchmarks/setcover_xl_start.py OUT [T]``; committed
output: ``reports/pall-lns/setcover-xl-start/``.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any


def main(out: Path, T: float) -> None:
    import highspy
    from pall_lns.generators import generate
    from pall_lns.instance import import_scip, read_scip_model
    from pall_lns.lns import LnsConfig, run_lns
    from pall_lns.selectors import load_default

    out.mkdir(parents=True, exist_ok=True)
    path = generate("setcover", "xl", 1000, out).path
    res: dict[str, Any] = {"instance": path.name, "time_limit_s": T}

    h = highspy.Highs()
    h.setOptionValue("threads", 1)
    h.setOptionValue("time_limit", T)
    h.setOptionValue("log_file", str(out / f"highs-{path.stem}.log"))
    h.setOptionValue("log_to_console", False)
    t = time.perf_counter()
    h.readModel(str(path))
    h.run()
    info = h.getInfo()
    wall = time.perf_counter() - t
    res["highs"] = {"final": info.objective_function_value, "wall_s": wall,
                    "dual_bound": info.mip_dual_bound}  # fmt: skip

    scip = import_scip()
    m = read_scip_model(path)
    seen: dict[str, Any] = {"incumbents": []}
    t0 = time.perf_counter()

    class Events(scip.Eventhdlr):  # type: ignore[misc,name-defined]
        def eventinit(self) -> None:
            self.model.catchEvent(scip.SCIP_EVENTTYPE.FIRSTLPSOLVED, self)
            self.model.catchEvent(scip.SCIP_EVENTTYPE.BESTSOLFOUND, self)

        def eventexec(self, event: Any) -> None:
            now = time.perf_counter() - t0
            if event.getType() == scip.SCIP_EVENTTYPE.FIRSTLPSOLVED:
                seen.setdefault("first_lp_s", now)
            else:
                obj = self.model.getSolObjVal(self.model.getBestSol())
                seen["incumbents"].append((now, obj))

    m.includeEventhdlr(Events(), "events", "first LP and incumbents")
    m.setRealParam("limits/time", T)
    m.optimize()
    res["scip"] = {**seen, "status": m.getStatus(), "final": m.getObjVal()}

    sel = load_default()
    r = run_lns(path, sel.ops, sel, LnsConfig(T, seed=0, background_free=False))
    res["pall"] = {"final": r.objective, "timeline": r.timeline, "iterations": r.iterations,
                   "init_end_s": r.stats["init_end_s"]}  # fmt: skip
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (out / "measure.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res)[:2000])


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 30.0)
