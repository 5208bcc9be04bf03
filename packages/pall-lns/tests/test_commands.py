"""solve, generate, evolve, oracle, train, export-sft and train-lm: what they write, and bad input
as one line with exit 2."""

import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from pall_lns.cli import main, sigterm_as_ctrl_c
from pall_lns.generators import generate
from pall_lns.instance import import_scip, read_instance, read_scip_model


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


def _read_sol(path, inst):
    x = np.zeros(inst.n)
    for line in path.read_text().splitlines()[1:]:
        name, value = line.split()
        x[inst.names.index(name)] = float(value)
    return x


def test_sigterm_writes_the_best_solution_like_ctrl_c(tmp_path):
    """Issue #46: ``kill`` (SIGTERM) used to end ``pall solve`` with nothing written, while
    Ctrl-C wrote the best checked solution. Now SIGTERM does what Ctrl-C does (exit 143)."""
    model = generate("setcover", "medium", 0, tmp_path).path
    sol = tmp_path / "out.sol"
    cmd = [sys.executable, "-m", "pall_lns.cli", "solve", str(model), "--time-limit", "60"]
    proc = subprocess.Popen(
        [*cmd, "--sol", str(sol)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        lines = []
        for line in proc.stderr:  # the first incumbent: there is something to write
            lines.append(line)
            if "scip-initial" in line:
                break
        proc.send_signal(signal.SIGTERM)
        out, rest = proc.communicate(timeout=30)
    finally:
        proc.kill()
    err = "".join(lines) + rest
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    # (SCIP's own "pressed CTRL-C" line may precede it: the SIGTERM reached SCIP as SIGINT)
    assert "pall: terminated (SIGTERM): objective" in out
    inst = read_instance(model)
    assert inst.is_feasible(_read_sol(sol, inst))
    assert json.loads(model.with_suffix(".trajectory.jsonl").read_text().splitlines()[-1])[
        "interrupted"
    ]


def test_sigterm_inside_a_scip_callback_stops_scip_as_ctrl_c_does(tmp_path):
    """A SIGTERM handler that raised KeyboardInterrupt inside one of our SCIP event handlers
    made SCIP fail ("SCIP: unspecified error!" and a traceback); re-raised as SIGINT it meets
    SCIP's own Ctrl-C handler, which stops the solve cleanly."""
    scip = import_scip()
    model = read_scip_model(generate("setcover", "medium", 0, tmp_path).path)

    class KillOnFirstSolution(scip.Eventhdlr):  # type: ignore[misc,name-defined]
        def eventinit(self):
            self.model.catchEvent(scip.SCIP_EVENTTYPE.BESTSOLFOUND, self)

        def eventexit(self):
            self.model.dropEvent(scip.SCIP_EVENTTYPE.BESTSOLFOUND, self)

        def eventexec(self, event):
            os.kill(os.getpid(), signal.SIGTERM)

    model.includeEventhdlr(KillOnFirstSolution(), "kill", "SIGTERM at the first incumbent")
    model.setBoolParam("misc/catchctrlc", True)
    model.setRealParam("limits/time", 30)
    # a no-op SIGTERM handler around the test, so a regression fails it instead of killing pytest
    safety = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        with sigterm_as_ctrl_c() as seen:
            model.optimize()
        assert signal.getsignal(signal.SIGTERM) is not safety  # restored on leaving
    finally:
        signal.signal(signal.SIGTERM, safety)
    assert model.getStatus() == "userinterrupt"
    assert seen.terminated
    assert model.getSolvingTime() < 20


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


def test_solve_returns_at_once_when_scip_proves_the_optimum(knapsack_lp, capsys):
    """Issue #53: ``pall solve`` stops at SCIP's proof of optimality, not at --time-limit."""
    import time

    model = knapsack_lp
    t = time.perf_counter()
    assert main(["solve", str(model), "--time-limit", "60", "--sync"]) == 0
    assert time.perf_counter() - t < 15.0
    out = capsys.readouterr().out
    assert "proven optimal by SCIP" in out
    assert "objective 9 " in out
    final = json.loads(model.with_suffix(".trajectory.jsonl").read_text().splitlines()[-1])
    assert final["stop"] == "optimal"
