"""pall bench: the overhead rows and claim, the compare mode (resumable), bad shares."""

import pytest
from pall_lns.cli import main

from paperstack.records import load_results


def test_bench_writes_overhead_rows_and_its_claim(tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "--out", str(out), "--size", "smoke", "--time-limit", "2"]) == 0
    res = load_results(out / "bench.json")
    metrics = {r.metric: r for r in res.rows}
    share = metrics["overhead_share"].value
    assert 0.0 <= share <= 1.0
    assert metrics["overhead_share"].n >= 1
    # the strict share splits into SCIP's handling of the sub-MIPs (here freeTransform on the
    # kept model) and the LNS's own work
    scip_io = metrics["scip_read_free_share"].value
    assert 0.0 < scip_io <= share
    assert metrics["lns_work_share"].value == pytest.approx(share - scip_io, abs=1e-12)
    per_iteration = metrics["overhead_share_per_iteration"]
    assert per_iteration.items is not None
    n_iter = sum(res.manifest.config["iterations"].values())  # per seed's run
    assert 1 <= len(per_iteration.items) <= n_iter
    # the claim's statistic: seconds outside optimize() per iteration over the mean
    # iteration, whose mean is the iterations' time share outside optimize()
    time_share = metrics["overhead_time_share"]
    assert time_share.items is not None
    assert time_share.items.keys() == per_iteration.items.keys()
    assert 0.0 <= time_share.value <= 1.0
    (claim,) = res.claims
    assert claim.id == "overhead_under_5pct"
    assert claim.lhs.metric == "overhead_time_share"  # judged on its interval
    assert claim.method in ("t", "bootstrap")
    assert res.manifest.config["overhead_share_rule"] == pytest.approx(0.03)
    assert res.manifest.config["background_free"] is True
    assert "overhead" in capsys.readouterr().out
    assert (out / "bench.md").is_file()


@pytest.mark.parametrize("bad", ["1", "-0.1", "x"])
def test_bench_rejects_a_bad_overhead_share(tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--out", str(tmp_path / "b"), "--overhead-share", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--overhead-share" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_bench_compare_pairs_pall_with_every_baseline(tmp_path):
    out = tmp_path / "bench"
    argv = ["bench", "--quick", "--out", str(out), "--size", "smoke", "--compare"]
    assert main([*argv, "--families", "setcover", "--no-progress"]) == 0
    res = load_results(out / "bench.json")
    ids = {c.id for c in res.claims}
    for base in ("scip", "scip-aggressive", "scip-alns", "highs", "lns-random", "lns-bandit"):
        assert f"smoke_pall_beats_{base}_integral" in ids
        assert f"smoke_pall_beats_{base}_gap" in ids
    assert res.row("pall", "primal_integral", "all").n == 1  # one instance per family and seed
    assert res.manifest.config["compare"]["methods"][0] == "pall"
    assert "smoke_premise_scip_leaves_room" in ids
    # Resumable: a rerun into the same --out reuses every finished run of the same budget.
    log = out / "compare-runs.jsonl"
    lines = log.read_text().splitlines()
    assert len(lines) == 7
    assert main([*argv, "--families", "setcover", "--no-progress"]) == 0
    assert log.read_text().splitlines() == lines
    again = load_results(out / "bench.json")
    assert (
        again.manifest.config["compare"]["finals_internal_sense"]
        == (res.manifest.config["compare"]["finals_internal_sense"])
    )


def test_bench_overhead_share_default_is_the_loops():
    import argparse

    from pall_lns.cli import _bench_arguments
    from pall_lns.lns import LnsConfig

    parser = argparse.ArgumentParser()
    _bench_arguments(parser)
    assert parser.parse_args([]).overhead_share == LnsConfig.overhead_share
