import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pall_lns import __version__
from pall_lns.cli import main
from pall_lns.experiment import METHODS
from pall_lns.instance import read_instance

from paperstack.records import Claim, ResultsFormatError, load_results

CLAIMS = {
    "premise_scip_leaves_room",
    "premise_operator_choice_matters",
    "lm_beats_random_heldout",
    "lm_beats_random_unseen_family",
    "lm_beats_linear_heldout",
    "pall_beats_scip_integral",
    "pall_beats_scip_aggressive_integral",
    "pall_beats_highs_integral",
    "lm_beats_bandit",
    "lm_beats_random_online",
    "async_beats_sync",
}


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("solve", "generate", "evolve", "oracle", "train", "export-sft", "demo", "bench"):
        assert cmd in out


def test_console_script_help_is_installed():
    script = shutil.which("pall", path=str(Path(sys.executable).parent))
    assert script is not None, "the pall console script is not installed"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


def test_solve_prints_progress_and_writes_a_feasible_sol(smoke_dir, tmp_path, capsys):
    model = smoke_dir / "setcover-smoke-s7.lp"
    sol, traj = tmp_path / "out.sol", tmp_path / "traj.jsonl"
    code = main(
        [
            "solve",
            str(model),
            "--time-limit",
            "1.5",
            "--sol",
            str(sol),
            "--trajectory",
            str(traj),
            "--sync",
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "obj" in err
    assert "scip-initial" in err
    inst = read_instance(model)
    lines = sol.read_text().splitlines()
    x = [0.0] * inst.n
    for line in lines[1:]:
        name, value = line.split()
        x[inst.names.index(name)] = float(value)
    assert inst.is_feasible(np.array(x))
    assert float(lines[0].split(":")[1]) == pytest.approx(inst.user_objective(np.array(x)))
    assert json.loads(traj.read_text().splitlines()[-1])["event"] == "final"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["solve", "MODEL", "--time-limit", "0"], "--time-limit 0: must be a finite number"),
        (["solve", "MODEL", "--time-limit", "inf"], "--time-limit inf: must be a finite"),
        (["solve", "MODEL", "--time-limit", "nan"], "--time-limit nan: must be a finite"),
        (["solve", "MODEL", "--time-limit", "soon"], "--time-limit soon: not a number"),
        (["solve", "MODEL", "--time-limit", "1", "--submip-time", "-3"], "--submip-time -3"),
        (["solve", "missing.lp", "--time-limit", "1"], "missing.lp: no such file"),
        (["solve", "X", "--time-limit", "1"], "is a directory"),
        (["solve", "MODEL", "--time-limit", "1", "--sol", "X"], "--sol"),
        (["solve", "MODEL", "--time-limit", "1", "--selector", "nope.json"], "no such selector"),
        (["generate", "--family", "knapsack", "--out", "X"], "--family 'knapsack'"),
        (["generate", "--family", "setcover", "--count", "0", "--out", "X"], "--count 0"),
        (["demo", "--out", "X", "--model", "gpt"], "--model gpt: no such model folder"),
        (["demo", "--out", "X", "--model", "./nowhere"], "--model ./nowhere: no such directory"),
        (["demo", "--out", "X", "--per-family", "0"], "--per-family 0: must be at least 1"),
        (["demo", "--out", "X", "--time-limit", "-1"], "--time-limit -1"),
        (["demo", "--out", "X", "--device", "cuda"], "--device cuda"),
        (["evolve", "X", "--mu", "0", "--out", "e.json"], "--mu 0: must be at least 1"),
        (["evolve", "X", "--lam", "0", "--out", "e.json"], "--lam 0: must be at least 1"),
        (["oracle", "X", "--ensemble", "e.json", "--states", "0", "--out", "o"], "--states 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(smoke_dir, tmp_path, capsys, args, message):
    model = str(smoke_dir / "auction-smoke-s7.lp")
    (tmp_path / "x").mkdir()
    argv = [model if a == "MODEL" else str(tmp_path / "x") if a == "X" else a for a in args]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pall: error:")
    assert message in err
    assert "\n" not in err


def test_solve_infeasible_model_exit_2(tmp_path, capsys):
    p = tmp_path / "inf.lp"
    p.write_text(
        "Minimize\n obj: x\nSubject To\n c1: x >= 2\nBounds\n 0 <= x <= 1\nGenerals\n x\nEnd\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(["solve", str(p), "--time-limit", "2", "--sync"])
    assert exc.value.code == 2
    assert "infeasible" in capsys.readouterr().err


def test_generate_writes_lp_and_metadata(tmp_path):
    assert (
        main(["generate", "--family", "indset,auction", "--size", "smoke", "--out", str(tmp_path)])
        == 0
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "auction-smoke-s0.json",
        "auction-smoke-s0.lp",
        "indset-smoke-s0.json",
        "indset-smoke-s0.lp",
    ]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory, smoke_dir):
    out = tmp_path_factory.mktemp("demo")
    data = tmp_path_factory.mktemp("dataset")
    for name in ("setcover-smoke-s7", "indset-smoke-s7"):
        for suffix in (".lp", ".json"):
            shutil.copy(smoke_dir / f"{name}{suffix}", data)
    # The quick protocol (micro LM) on two smoke models with a short budget, so the fast suite
    # stays fast; `demo --quick` itself runs in CI's isolation session.
    argv = ["demo", "--quick", "--time-limit", "0.5", "--dataset", str(data), "--out", str(out)]
    # a run log left by an earlier demo into the same folder is replaced, not appended to
    (out / "runs.jsonl").write_text('{"instance": "stale.lp", "method": "scip"}\n')
    assert main([*argv, "--no-progress"]) == 0
    return out


def test_demo_run_log_holds_this_run_only(demo_dir):
    lines = (demo_dir / "runs.jsonl").read_text().splitlines()
    runs = [json.loads(line) for line in lines]
    assert len(runs) == 2 * len(METHODS)
    assert "stale.lp" not in {r["instance"] for r in runs}


def test_demo_quick_writes_valid_results_with_claims_from_rows(demo_dir):
    results = load_results(demo_dir / "results.json")  # validates and recomputes every claim
    assert results.manifest.package == "pall-lns"
    assert results.manifest.version == __version__
    assert {c.id for c in results.claims} == CLAIMS
    assert [c.id for c in results.claims[:2]] == [  # the premises are measured first
        "premise_scip_leaves_room",
        "premise_operator_choice_matters",
    ]
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin
        )
        assert again.verdict == claim.verdict
        if isinstance(claim.rhs, float):
            continue
        # paired over the same instances or held-out states, not two point estimates
        assert claim.method in ("paired-t", "paired-bootstrap")
    for method in METHODS:
        row = results.row(method, "primal_integral", "all")
        assert row.items is not None
        assert sorted(row.items) == ["indset-smoke-s7.lp", "setcover-smoke-s7.lp"]
        for split in ("setcover", "indset", "all"):
            assert 0.0 <= results.row(method, "primal_integral", split).value <= 1.0
            assert 0.0 <= results.row(method, "primal_gap", split).value <= 1.0
    for split in ("heldout-same", "heldout-unseen"):
        lm = results.row("lm", "oracle_reward_share", split)
        rnd = results.row("random", "oracle_reward_share", split)
        assert lm.items is not None
        assert rnd.items is not None
        assert lm.items.keys() == rnd.items.keys()  # the same held-out states
        assert all(0.0 <= v <= 1.0 for v in lm.items.values())
    assert results.manifest.config["pall_decisions"] > 0
    assert (demo_dir / "report.md").read_text().startswith("# pall-lns")


def test_demo_claims_follow_the_rows_not_the_code(demo_dir):
    data = json.loads((demo_dir / "results.json").read_text())
    for row in data["rows"]:
        if row["system"] == "pall" and row["metric"] == "primal_integral" and row["split"] == "all":
            row["items"] = {k: v + 0.5 for k, v in row["items"].items()}
            row["value"] += 0.5
    bad = demo_dir / "tampered.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="does not follow from its rows"):
        load_results(bad)


def test_offline_pipeline_evolve_oracle_train_export(smoke_dir, tmp_path):
    train = tmp_path / "train"
    train.mkdir()
    shutil.copy(smoke_dir / "auction-smoke-s7.lp", train)
    ens, data = tmp_path / "ens.json", tmp_path / "oracle.jsonl"
    sel, sft = tmp_path / "sel.json", tmp_path / "sft.jsonl"
    assert (
        main(
            [
                "evolve",
                str(train),
                "--time-limit",
                "0.4",
                "--generations",
                "0",
                "--mu",
                "1",
                "--ensemble-size",
                "3",
                "--out",
                str(ens),
            ]
        )
        == 0
    )
    ensemble = json.loads(ens.read_text())
    assert len(ensemble["ops"]) == 3
    assert len({json.dumps(o, sort_keys=True) for o in ensemble["ops"]}) == 3
    assert (
        main(
            [
                "oracle",
                str(train),
                "--ensemble",
                str(ens),
                "--time-limit",
                "1",
                "--states",
                "2",
                "--out",
                str(data),
            ]
        )
        == 0
    )
    records = [json.loads(line) for line in data.read_text().splitlines()]
    assert records
    assert all(
        len(r["rewards"]) == 3 and r["label"] == int(np.argmax(r["rewards"])) for r in records
    )
    assert main(["train", "--data", str(data), "--ensemble", str(ens), "--out", str(sel)]) == 0
    assert json.loads(sel.read_text())["format"] == "pall-lns/selector-v1"
    assert main(["export-sft", "--data", str(data), "--out", str(sft)]) == 0
    example = json.loads(sft.read_text().splitlines()[0])
    assert example["messages"][0]["role"] == "user"
    assert example["messages"][1]["content"].startswith("OP=")
    # the trained selector drives `pall solve`
    assert (
        main(
            [
                "solve",
                str(train / "auction-smoke-s7.lp"),
                "--time-limit",
                "0.8",
                "--selector",
                str(sel),
                "--sync",
                "--quiet",
            ]
        )
        == 0
    )


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


def test_evolve_names_the_unreadable_model_once(smoke_dir, tmp_path, capsys):
    train = tmp_path / "train"
    train.mkdir()
    shutil.copy(smoke_dir / "auction-smoke-s7.lp", train)
    (train / "broken.lp").write_text("Minimize\n obj: x +\nSubject To\n c1: x >= \nEnd\n")
    with pytest.raises(SystemExit) as exc:
        main(["evolve", str(train), "--time-limit", "0.3", "--out", str(tmp_path / "e.json")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "broken.lp: cannot read model" in err[0]
    assert not (tmp_path / "e.json").exists()


def test_truncated_lp_is_refused_by_solve(smoke_dir, tmp_path, capsys):
    text = (smoke_dir / "setcover-smoke-s7.lp").read_text()
    cut = tmp_path / "cut.lp"
    cut.write_text(text[: text.index("Binaries")])
    with pytest.raises(SystemExit) as exc:
        main(["solve", str(cut), "--time-limit", "1", "--sync"])
    assert exc.value.code == 2
    assert "truncated model file" in capsys.readouterr().err
    assert not cut.with_suffix(".sol").exists()


def test_train_lm_refuses_a_missing_model_folder_before_training(tmp_path, capsys):
    from importlib import resources

    data = resources.files("pall_lns").joinpath("data", "oracle-train.jsonl")
    ens = resources.files("pall_lns").joinpath("data", "default_selector.json")
    argv = ["train-lm", "--data", str(data), "--ensemble", str(ens), "--out", str(tmp_path / "m")]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--model", str(tmp_path / "none")])
    assert exc.value.code == 2
    assert "no such directory" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("selector", ["exp3", "egreedy", "bandit"])
def test_solve_with_each_bandit(smoke_dir, tmp_path, selector):
    model = str(smoke_dir / "setcover-smoke-s7.lp")
    sol, traj = tmp_path / "x.sol", tmp_path / "t.jsonl"
    argv = ["solve", model, "--time-limit", "0.8", "--selector", selector, "--sync", "--quiet"]
    assert main([*argv, "--sol", str(sol), "--trajectory", str(traj)]) == 0
    assert sol.read_text().startswith("objective value:")


@pytest.mark.slow
def test_bench_compare_pairs_pall_with_every_baseline(tmp_path):
    out = tmp_path / "bench"
    argv = ["bench", "--quick", "--out", str(out), "--size", "smoke", "--compare"]
    assert main([*argv, "--families", "setcover", "--no-progress"]) == 0
    res = load_results(out / "bench.json")
    ids = {c.id for c in res.claims}
    for base in ("scip", "scip-aggressive", "highs", "lns-random", "lns-bandit"):
        assert f"smoke_pall_beats_{base}_integral" in ids
        assert f"smoke_pall_beats_{base}_gap" in ids
    assert res.row("pall", "primal_integral", "all").n == 1  # one instance per family and seed
    assert res.manifest.config["compare"]["methods"][0] == "pall"
    assert "smoke_premise_scip_leaves_room" in ids
    # Resumable: a rerun into the same --out reuses every finished run of the same budget.
    log = out / "compare-runs.jsonl"
    lines = log.read_text().splitlines()
    assert len(lines) == 6
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
