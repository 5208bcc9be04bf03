"""Step time of NuMuon vs Muon vs AdamW on large matrices on a CUDA device (not run in CI).

    python benchmarks/gpu_step_time.py --out reports/numuon-bench-gpu

Writes ``bench.json`` in the results schema (ratios to ``torch.optim.Muon``), for the sizes the
paper's models use (up to 4096 x 4096 and 4096 x 11008) and NuMuon's rank sweep on 4096 x 4096.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from numuon import __version__
from numuon.bench import RANK_RATIOS, run_bench

from paperstack.records import Manifest, Results, prepare_out_dir, write_results

SIZES = ((1024, 1024), (2048, 2048), (4096, 11008), (4096, 4096))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_step_time.py: needs a CUDA device")
    out = prepare_out_dir(args.out)
    manifest = Manifest.collect("numuon", __version__, config={"sizes": SIZES})
    rows = run_bench(SIZES, RANK_RATIOS, args.repeats, seed=0, device="cuda", progress=print)
    write_results(out / "bench.json", Results(manifest=manifest.finish(), rows=rows))


if __name__ == "__main__":
    main()
