"""The commands' own behaviour: the demo's claims (a tiny plan), trace/simulate/serve, bench,
and the refusals of bad traces, numbers and files."""

import json

import pytest
from pace_scheduler import __version__, demo, outdir
from pace_scheduler.cli import main

from paperstack.records import Claim, ResultsFormatError, load_results


def test_demo_writes_rows_and_claims_computed_from_them(tmp_path, tiny_demo, capsys):
    # an earlier run's files (#46): replaced or removed, never left beside this run's results
    stale = {"fit.json": "{not json", "runs.jsonl": '{"stale": true}\n', "report.md": "old"}
    for name, text in stale.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "notes.txt").write_text("mine")
    argv = ["demo", "--workers", "1", "--seeds", "0-2", "--out", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    outdir.release_out_dirs()
    assert not (tmp_path / outdir.LOCK_NAME).exists()
    assert (tmp_path / "notes.txt").read_text() == "mine"  # not the demo's: kept
    assert '"stale"' not in (tmp_path / "runs.jsonl").read_text()
    results = load_results(tmp_path / "results.json")  # validates and recomputes every claim
    fit = json.loads((tmp_path / "fit.json").read_text())
    assert fit["model"] == results.manifest.config["engine"]["model"]  # this run's profile
    assert results.manifest.package == "pace-scheduler"
    assert results.manifest.version == __version__
    assert results.manifest.started < results.manifest.finished
    ids = [c.id for c in results.claims]
    assert ids[:2] == ["engine_premise_parallel_branches_pay", "engine_premise_branch_externality"]
    for sweep in ("engine", "h200"):
        for claim in (
            "pace_beats_off_goodput",
            "pace_beats_every_fixed_cap",
            "predictor_r2_ge_0_9",
        ):
            assert f"{sweep}_{claim}" in ids
    by_id = {c.id: c for c in results.claims}
    for sweep in ("engine", "h200"):  # the goodput claims rest on the premises of their sweep
        premises = (f"{sweep}_premise_parallel_branches_pay", f"{sweep}_premise_branch_externality")
        assert by_id[f"{sweep}_pace_beats_eager_goodput"].requires == premises
        assert by_id[f"{sweep}_predictor_r2_ge_0_9"].requires == ()
    for claim in results.claims:
        again = Claim.compare(
            claim.id, claim.statement, results.rows, claim.lhs, claim.op, claim.rhs, claim.margin,
            requires=[by_id[p] for p in claim.requires],
        )  # fmt: skip
        assert again.verdict == claim.verdict
        assert again.unmet == claim.unmet
        assert claim.method != "normal"  # paired over seeds, or a row against a constant
    metrics = {r.metric for r in results.rows}
    for m in ("goodput", "slo_attainment", "p99_token_latency", "mean_branch_width"):
        assert m in metrics
    pace = results.row("pace", "goodput", "h200@1.00x")
    assert pace.n == 3
    assert set(pace.seeds or {}) == {"0", "1", "2"}
    served = results.row("pace", "goodput", "engine@1.00x")
    assert set(served.seeds or {}) == {"0", "1"}  # the engine runs the first engine_seeds
    engine = results.manifest.config["engine"]
    assert engine["best_fixed_cap_on_validation"] == "global-2"
    assert all(0 < f < 100 for f in engine["speed_factors"].values())  # one probe per group
    out = capsys.readouterr().out
    assert "h200_pace_beats_off_goodput:" in out
    assert " inconclusive" in out
    assert (tmp_path / "goodput_vs_load.png").is_file()
    assert (tmp_path / "attainment_vs_load.png").is_file()
    assert (tmp_path / "report.md").read_text().startswith("# pace-scheduler")
    # tampering with a row is caught: the stored claim no longer follows from it
    data = json.loads((tmp_path / "results.json").read_text())
    for claim in data["claims"]:
        if claim["id"] == "h200_predictor_r2_ge_0_9":
            claim["verdict"] = "held" if claim["verdict"] != "held" else "not_held"
            claim["held"] = claim["verdict"] == "held"
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match=r"h200_predictor_r2_ge_0_9|digest"):
        load_results(tmp_path / "results.json")


def test_trace_then_simulate_replays_every_policy(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    assert main(["trace", "--out", str(trace), "--requests", "15", "--rate", "2"]) == 0
    assert (
        main(
            [
                "simulate",
                "--trace",
                str(trace),
                "--policy",
                "irp-off",
                "--policy",
                "pace",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    res = load_results(tmp_path / "o" / "results.json")
    assert {r.system for r in res.rows} == {"irp-off", "pace"}


def _one_line_error(capsys, argv, *needles):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("pace: error:")
    for needle in needles:
        assert needle in err
    return err


def test_malformed_trace_is_a_one_line_error(tmp_path, capsys):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"kind": "branch", "parent": "ghost", "fork": 0, "tokens": 3}\n')
    _one_line_error(capsys, ["simulate", "--trace", str(trace)], str(trace))


def test_unknown_parent_is_a_one_line_error(tmp_path, capsys):
    trace = tmp_path / "bad.jsonl"
    req = {
        "kind": "request",
        "id": "a",
        "arrival": 0,
        "prompt_tokens": 4,
        "serial_tokens": [2, 2],
        "ttft_slo": 1,
        "tpot_slo": 0.1,
    }
    trace.write_text(
        json.dumps(req)
        + "\n"
        + json.dumps({"kind": "branch", "parent": "b", "fork": 0, "tokens": 3})
        + "\n"
    )
    _one_line_error(capsys, ["simulate", "--trace", str(trace)], "unknown request 'b'")


def test_slo_le_zero_is_a_one_line_error(tmp_path, capsys):
    _one_line_error(
        capsys, ["trace", "--out", str(tmp_path / "t.jsonl"), "--tpot-slo", "0"], "tpot_slo"
    )


def test_profile_too_small_to_fit_is_a_one_line_error(tmp_path, capsys):
    prof = tmp_path / "profile.jsonl"
    prof.write_text(
        "".join(json.dumps({"n_decode": b, "sum_ctx": b, "seconds": 0.01}) + "\n" for b in (1, 2))
    )
    _one_line_error(
        capsys, ["profile", "--out", str(tmp_path / "o"), "--fit-only", str(prof)], "too few"
    )


def test_bad_latency_file_is_a_one_line_error(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    main(["trace", "--out", str(trace), "--requests", "3"])
    capsys.readouterr()
    _one_line_error(
        capsys,
        ["simulate", "--trace", str(trace), "--latency", str(tmp_path / "nope.json")],
        "no such file",
    )


def test_trace_out_that_is_a_directory_is_a_one_line_error(tmp_path, capsys):
    # the core's atomic writer refuses a directory target (issue 16 item 8, issue 20 item 6)
    _one_line_error(capsys, ["trace", "--out", str(tmp_path), "--requests", "3"], "is a directory")
    assert list(tmp_path.iterdir()) == []


def test_simulate_trace_that_is_a_directory_is_a_one_line_error(tmp_path, capsys):
    _one_line_error(capsys, ["simulate", "--trace", str(tmp_path)], "is a directory")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["trace", "--out", "t.jsonl", "--requests", "0"], "--requests"),
        (["trace", "--out", "t.jsonl", "--rate", "-1"], "--rate"),
        (["trace", "--out", "t.jsonl", "--rate", "nan"], "--rate"),
        (["demo", "--quick", "--out", "o", "--workers", "0"], "--workers"),
        (["demo", "--quick", "--out", "o", "--seeds", "3-1"], "--seeds"),
        (["bench", "--out", "o", "--repeats", "0"], "--repeats"),
        (["bench", "--out", "o", "--repeats", "1"], "--repeats"),
        (["simulate", "--trace", "t.jsonl", "--kv-blocks", "0"], "--kv-blocks"),
    ],
)
def test_impossible_numbers_are_refused(tmp_path, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err
    assert "Traceback" not in err


def test_reduced_plan_keeps_the_full_design_and_shrinks_only_the_sizes():
    full, reduced = demo.plan(False), demo.reduced_plan()
    assert reduced.engine_loads == full.engine_loads
    assert reduced.engine_seeds == full.engine_seeds >= 3
    assert reduced.engine_caps == full.engine_caps  # the whole fixed-cap grid
    assert reduced.sim_caps == full.sim_caps
    assert reduced.sim_policies == full.sim_policies
    assert reduced.validation_seeds == full.validation_seeds
    assert min(reduced.sim_loads) < reduced.medium < max(reduced.sim_loads)
    assert reduced.engine_requests < full.engine_requests
    assert reduced.sim_requests < full.sim_requests


def test_demo_on_validation_seeds_is_refused(tmp_path, capsys):
    _one_line_error(
        capsys,
        ["demo", "--quick", "--seeds", "100,101", "--out", str(tmp_path / "o")],
        "validation",
    )
    assert not (tmp_path / "o").exists()  # the folder it created is removed again


def test_cuda_on_a_cpu_torch_is_a_one_line_error(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is there")
    _one_line_error(
        capsys, ["demo", "--quick", "--device", "cuda", "--out", str(tmp_path / "o")], "cuda"
    )


def test_model_folder_with_a_bad_config_is_a_one_line_error(tmp_path, capsys):
    from pace_scheduler.profile import toy_model

    folder = tmp_path / "model"
    toy_model("micro").save_pretrained(folder)
    (folder / "config.json").write_text("{not json")
    capsys.readouterr()  # save_pretrained's own progress bar
    err = _one_line_error(
        capsys, ["serve", "--trace", str(folder / "config.json"), "--model", str(folder)]
    )
    assert "config.json" in err


def test_bench_writes_decision_times_and_sim_speed(tmp_path, monkeypatch):
    from pace_scheduler import bench

    monkeypatch.setattr(bench, "BATCH_SIZES", (8, 64))
    monkeypatch.setattr(bench, "SIM_REQUESTS", 20)
    assert main(["bench", "--out", str(tmp_path), "--repeats", "5", "--no-progress"]) == 0
    results = load_results(tmp_path / "bench.json")
    assert results.row("pace", "decision_time", "batch=64").value > 0
    assert results.row("irp-off", "sim_events_per_s_vs_irp-off", "h200@1.00x").value == 1.0


def test_demo_replays_a_users_trace_under_every_policy(tmp_path, tiny_demo):
    from pace_scheduler.workload import WorkloadConfig, generate, write_trace

    trace = tmp_path / "t.jsonl"
    small = WorkloadConfig(rate=50, n_requests=6, prompt_mean=16, serial_mean=4, branch_mean=6)
    write_trace(trace, generate(small, seed=3))
    out = tmp_path / "out"
    assert main(["demo", "--quick", "--dataset", str(trace), "--out", str(out)]) == 0
    results = load_results(out / "results.json")
    assert results.claims == []
    assert results.row("pace", "goodput", "h200@trace").n == 6
    assert results.row("irp-off", "mean_branch_width", "engine@trace").value == 1.0
    assert results.row("pace", "slo_attainment", "engine@trace").n == 6


def test_simulate_takes_the_length_hints_from_the_trace(tmp_path, monkeypatch):
    from pace_scheduler import simulator
    from pace_scheduler.workload import WorkloadConfig, generate, summarize, write_trace

    trace = tmp_path / "t.jsonl"
    requests = generate(WorkloadConfig(n_requests=8, branch_mean=40, serial_mean=10), seed=1)
    write_trace(trace, requests)
    seen = []
    real = simulator.simulate
    monkeypatch.setattr(
        simulator,
        "simulate",
        lambda reqs, m, p, eng, seed=0: seen.append(eng) or real(reqs, m, p, eng, seed),
    )
    assert main(["simulate", "--trace", str(trace), "--policy", "pace"]) == 0
    stats = summarize(requests)
    assert seen[0].branch_len_hint == pytest.approx(stats["mean_branch_tokens"])
    assert seen[0].cp_len_hint == pytest.approx(stats["mean_critical_path"])


def test_serve_replays_a_trace_in_the_engine(tmp_path, monkeypatch, capsys):
    from pace_scheduler import profile
    from pace_scheduler.workload import WorkloadConfig, generate, write_trace

    micro = profile.toy_model
    monkeypatch.setattr(profile, "toy_model", lambda: micro("micro"))
    trace = tmp_path / "t.jsonl"
    small = WorkloadConfig(rate=50, n_requests=5, prompt_mean=16, serial_mean=4, branch_mean=6)
    write_trace(trace, generate(small, seed=2))
    argv = ["serve", "--trace", str(trace), "--policy", "irp-off", "--policy", "pace"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 0
    res = load_results(tmp_path / "o" / "results.json")
    assert {r.system for r in res.rows} == {"irp-off", "pace"}
    assert (tmp_path / "o" / "fit.json").is_file()  # it profiled the engine first
    assert "irp-off" in capsys.readouterr().out


def test_serve_with_a_directory_as_fit_is_a_one_line_error(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    main(["trace", "--out", str(trace), "--requests", "2"])
    capsys.readouterr()
    _one_line_error(
        capsys, ["serve", "--trace", str(trace), "--fit", str(tmp_path)], "is a directory"
    )
