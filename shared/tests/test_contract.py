"""The contract CLI every package builds on: common flags, the common flow, clean failures."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import time
from pathlib import Path

import pytest

from paperstack.contract import ContractCLI, Report, Run, check_model, parse_seeds
from paperstack.errors import PaperstackError
from paperstack.progress import Progress
from paperstack.records import Claim, Row, load_results


def _cli(fail: BaseException | None = None, sleep: float = 0.0) -> ContractCLI:
    cli = ContractCLI("toy", "toy-method", "0.1.0", "``toy``: a toy method.\n\nMore text.")
    seen: dict[str, object] = {}

    def extra(p: argparse.ArgumentParser) -> None:
        p.add_argument("--scale", type=float, default=1.0)

    @cli.demo(arguments=extra, seeds=3, quick_seeds=2, model="a base model id or path")
    def demo(run: Run) -> Report:
        seen["run"] = run
        if fail is not None:
            raise fail
        time.sleep(sleep)
        s = run.args.scale
        rows = [
            Row.from_seeds("method", "acc", {k: 0.9 * s + 0.01 * k for k in run.seeds}),
            Row.from_seeds("baseline", "acc", {k: 0.5 + 0.02 * k for k in run.seeds}),
        ]
        claims = [
            Claim.compare("beats", "method beats baseline", rows, ("method", "acc"), "gt",
                          ("baseline", "acc")),
            Claim.compare("floor", "method reaches 0.99", rows, ("method", "acc"), "ge", 0.99),
        ]  # fmt: skip
        return Report(rows, claims, intro="A toy.", config={"scale": s})

    @cli.bench()
    def bench(run: Run) -> Report:
        return Report([Row.from_seeds("method", "speedup", {0: 2.0, 1: 2.2, 2: 2.1})])

    @cli.command("hello", "say hello", lambda p: p.add_argument("name"))
    def hello(args: argparse.Namespace) -> int:
        print(f"hello {args.name}")
        return 0

    cli.seen = seen  # type: ignore[attr-defined]
    return cli


def test_demo_runs_the_common_flow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert _cli(sleep=1.1).main(["demo", "--out", str(out), "--scale", "1.0"]) == 0
    printed = capsys.readouterr().out
    assert "toy: beats: held (" in printed
    assert "toy: floor: not held (" in printed  # a failed claim is reported, exit 0
    assert "1 held / 1 not held / 0 inconclusive" in printed
    res = load_results(out)
    assert res.manifest.config["seeds"] == [0, 1, 2]
    assert res.manifest.config["scale"] == 1.0
    assert res.manifest.started < (res.manifest.finished or "")
    assert (out / "report.md").read_text().startswith("# toy-method 0.1.0: demo")


def test_seeds_quick_and_explicit(tmp_path: Path) -> None:
    cli = _cli()
    cli.main(["demo", "--out", str(tmp_path / "a"), "--quick", "--seed", "5"])
    assert cli.seen["run"].seeds == (5, 6)  # type: ignore[attr-defined]
    cli.main(["demo", "--out", str(tmp_path / "b"), "--seeds", "0-2,9"])
    assert cli.seen["run"].seeds == (0, 1, 2, 9)  # type: ignore[attr-defined]
    assert parse_seeds("3") == (3,)
    with pytest.raises(argparse.ArgumentTypeError, match="repeated"):
        parse_seeds("1,1")


def test_bench_writes_bench_json_and_md(tmp_path: Path) -> None:
    assert _cli().main(["bench", "--out", str(tmp_path)]) == 0
    assert load_results(tmp_path / "bench.json").rows[0].value == pytest.approx(2.1)
    assert (tmp_path / "bench.md").is_file()
    assert not (tmp_path / "results.json").exists()


def test_package_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli().main(["hello", "world"]) == 0
    assert capsys.readouterr().out == "hello world\n"


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str], cli: ContractCLI | None = None
           ) -> str:  # fmt: skip
    with pytest.raises(SystemExit) as info:
        (cli or _cli()).main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_out_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    assert "exists and is not a directory" in _fails(["demo", "--out", str(f)], capsys)


def test_a_run_that_fails_on_input_leaves_no_empty_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "new"
    cli = _cli(fail=PaperstackError("--dataset x.jsonl: line 3: not JSON"))
    assert "line 3: not JSON" in _fails(["demo", "--out", str(out)], capsys, cli)
    assert not out.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    _fails(["demo", "--out", str(kept)], capsys, cli)
    assert kept.is_dir()  # a folder the user made is theirs


def test_ctrl_c_exits_130_and_cleans_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "new"
    with pytest.raises(SystemExit) as info:
        _cli(fail=KeyboardInterrupt()).main(["demo", "--out", str(out)])
    assert info.value.code == 130
    assert "interrupted" in capsys.readouterr().err
    assert not out.exists()


def test_model_and_device_are_checked_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "o")
    start = time.monotonic()
    assert "no such directory" in _fails(["demo", "--out", out, "--model", "./nope"], capsys)
    assert "no such directory" in _fails(["demo", "--out", out, "--model", "/no/where"], capsys)
    assert time.monotonic() - start < 5  # no hub retries
    assert check_model("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"  # a hub id is passed on
    assert check_model(str(tmp_path)) == str(tmp_path)
    no_model = _fails(["bench", "--out", out, "--model", "x"], capsys)
    assert "builds its own models" in no_model
    pytest.importorskip("torch")
    import torch

    if not torch.cuda.is_available():
        assert "not available here" in _fails(["demo", "--out", out, "--device", "cuda"], capsys)
    assert "not a device" in _fails(["demo", "--out", out, "--device", "gpu0"], capsys)
    assert not (tmp_path / "o").exists()


def test_progress_prints_lines_when_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress(4, "training", stream=stream, interval=0.0) as bar:
        for _ in range(4):
            bar.advance(loss=0.5)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("training: 1/4 (25%)")
    assert lines[-1].startswith("training: 4/4 (100%)")
    assert "loss 0.5" in lines[-1]
    quiet = io.StringIO()
    with Progress(4, "x", stream=quiet, enabled=False) as bar:
        bar.advance()
    assert quiet.getvalue() == ""


def test_help_is_the_module_docstring_summary(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _cli().main(["--help"])
    text = capsys.readouterr().out
    assert "a toy method" in text
    assert "More text" not in text
    json.dumps(text)


def test_number_types_for_package_flags() -> None:
    from paperstack.contract import (
        fraction,
        non_negative_float,
        non_negative_int,
        positive_float,
        positive_int,
    )

    assert positive_int("3") == 3
    assert non_negative_int("0") == 0
    assert positive_float("1e-3") == 1e-3
    assert fraction("0.25") == 0.25
    assert non_negative_float("0") == 0.0
    for func, bad, message in [
        (positive_int, "0", "must be >= 1"),
        (positive_int, "x", "not an integer"),
        (non_negative_int, "-1", "must be >= 0"),
        (positive_float, "nan", "finite"),
        (positive_float, "-2", "must be > 0"),
        (fraction, "1.5", "between 0 and 1"),
        (non_negative_float, "-0.5", "must be >= 0"),
        (non_negative_float, "inf", "finite"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            func(bad)


def test_settled_heap_freezes_what_is_alive_and_still_collects_new_garbage() -> None:
    import gc

    from paperstack.contract import settled_heap

    assert gc.get_freeze_count() == 0
    with settled_heap("json.JSONDecoder", "email.mime.text"):  # an attribute, a module
        import email.mime.text  # noqa: F401  (imported by the helper: no new import here)

        frozen = gc.get_freeze_count()
        assert frozen > 1000
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # the run's own garbage is collected as before
        with settled_heap():  # a heap frozen already (a test fixture's) is left as it is
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == 0
    with pytest.raises(ModuleNotFoundError), settled_heap("no_such_module_here.Thing"):
        pass
    assert gc.get_freeze_count() == 0


def test_trl_precision_args_name_fields_the_installed_transformers_takes(tmp_path) -> None:
    """The fields exist on this transformers' TrainingArguments (which every trl config
    extends), pass without a deprecation warning and turn bf16 and recompute off; bf16 stays
    the caller's choice. (That trl's own defaults are then overridden is tested in the trl
    packages, e.g. meta-pref's ``test_adaptation_runs_in_fp32_without_recomputing_the_forward``.)"""
    import warnings

    transformers = pytest.importorskip("transformers")
    from paperstack.contract import trl_precision_args

    fields = trl_precision_args()
    names = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
    assert set(fields) <= names
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **fields)
    assert args.bf16 is False
    assert args.fp16 is False
    assert args.gradient_checkpointing is False
    assert trl_precision_args(bf16=True)["bf16"] is True
