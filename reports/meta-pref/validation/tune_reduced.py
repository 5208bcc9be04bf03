"""The reduced equal search of 2026-12-06 (meta-pref 0.3, validation seeds 98 and 99, language
`val`): both grids cut alike to the first two values of their first axis (FOMAML: inner lr
0.003, 0.01; joint: lr 1.5e-4, 5e-4) x all three values of the second (FOMAML: outer lr; joint:
batch), no edge extension, because the full 3 x 3 grids (36 trainings) did not fit the shared
CPU before the session's deadline. The six FOMAML points were measured by `meta-pref tune
--extensions 0` (same code, same seeds) before it was stopped during its seventh point; their
scores are read from that run's log (tune-grids-meta.log) and the joint points are run here
with meta_pref.tune.tune_grids itself, so both go through the same search and score."""

import ast
import sys
from pathlib import Path

import meta_pref.tune as t

out = Path(sys.argv[1])
logged = {}
for line in Path(sys.argv[2]).read_text().splitlines():
    if line.startswith("  {"):
        point, score = line.strip().rsplit(": ", 1)
        d = ast.literal_eval(point)
        logged[(d["inner_lr"], d["outer_lr"])] = float(score)

META = {"inner_lr": t.META_GRID["inner_lr"][:2], "outer_lr": t.META_GRID["outer_lr"]}
JOINT = {"lr": t.JOINT_GRID["lr"][:2], "batch": t.JOINT_GRID["batch"]}
real_search = t.search


def search(grid, evaluate, extensions=0, log=print):
    if "inner_lr" in grid:  # FOMAML: the scores the killed full run measured
        return real_search(grid, lambda p: logged[(p["inner_lr"], p["outer_lr"])], extensions, log)
    return real_search(grid, evaluate, extensions, log)


t.search = search
report = t.tune_grids(out, meta_grid=META, joint_grid=JOINT, extensions=0)
print({k: report[k]["best"] for k in ("meta", "joint")})
