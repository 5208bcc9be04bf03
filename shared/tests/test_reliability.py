"""Reliability 0.3 in the core: a full disk, SIGTERM, ``--out ""``, huge seeds, a cache path
that is a file, non-finite JSON and tampered results, each met once here, for every package."""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from paperstack import cache, contract, records
from paperstack.contract import ContractCLI, Report, Run, parse_seeds, seed_int
from paperstack.errors import PaperstackError, cli_guard, disk_error_text
from paperstack.records import (
    Claim,
    JsonlWriter,
    Manifest,
    Results,
    ResultsFormatError,
    Row,
    iter_jsonl,
    load_results,
    prepare_out_dir,
    redact_secrets,
    strict_json_loads,
    write_results,
)

# --------------------------------------------------------------------------- seeds and numbers


@pytest.mark.parametrize("text", ["18446744073709551616", "4294967296", "-1", "1e999", "9" * 5000])
def test_seed_type_refuses_out_of_range(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        seed_int(text)


def test_seed_type_accepts_the_full_range() -> None:
    assert seed_int("0") == 0
    assert seed_int(str(2**32 - 1)) == 2**32 - 1


@pytest.mark.parametrize("text", ["18446744073709551616", "0-4294967296", "0-20000", "1" * 30])
def test_parse_seeds_refuses_huge_seeds_and_ranges(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_seeds(text)


def test_int_flags_refuse_numbers_past_64_bits() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="out of range"):
        contract.positive_int(str(2**64))
    assert contract.positive_int(str(2**62)) == 2**62


def _toy_cli(tmp_path: Path) -> ContractCLI:
    cli = ContractCLI("toy", "toy-dist", "0.0.1")

    def extra(p: argparse.ArgumentParser) -> None:
        p.add_argument("--out", required=True)
        p.add_argument("--seed", type=int, default=0)  # a package's own bare-int seed

    @cli.command("draw", "a package's own command", extra)
    def _draw(args: argparse.Namespace) -> int:
        out = prepare_out_dir(args.out)
        (out / "drawn.txt").write_text(str(args.seed))
        return 0

    @cli.demo(seeds=3)
    def _demo(run: Run) -> Report:
        rows = [Row.from_seeds("a", "m", {s: 1.0 for s in run.seeds})]
        return Report(rows, [])

    return cli


def test_a_package_commands_bare_int_seed_gets_the_contract_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = _toy_cli(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli.main(["draw", "--out", str(tmp_path / "o"), "--seed", "-1"])
    assert exc.value.code == 2
    assert "--seed" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_demo_seeds_running_past_the_largest_seed_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = _toy_cli(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli.main(["demo", "--out", str(tmp_path / "o"), "--seed", str(2**32 - 2)])
    assert exc.value.code == 2
    assert "largest seed" in capsys.readouterr().err


# --------------------------------------------------------------------------- --out and the cache


@pytest.mark.parametrize(
    "argv", [["draw", "--out", ""], ["demo", "--out", "  "], ["demo", "--out="]]
)
def test_empty_out_is_refused_for_every_command(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        _toy_cli(tmp_path).main(argv)
    assert exc.value.code == 2
    assert "--out: empty path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_prepare_out_dir_refuses_empty_and_dangling(tmp_path: Path) -> None:
    with pytest.raises(PaperstackError, match="empty path"):
        prepare_out_dir("")
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(PaperstackError, match="dangling symbolic link"):
        prepare_out_dir(link)


def test_prepare_out_dir_on_a_full_disk_says_so_and_removes_what_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    def full(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", full)
    with pytest.raises(PaperstackError, match="No space left on device"):
        prepare_out_dir(tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_cache_path_that_is_a_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bogus = tmp_path / "file"
    bogus.write_text("x")
    monkeypatch.setenv("PAPERSTACK_CACHE", str(bogus))
    with pytest.raises(cache.CacheError, match="not a directory"):
        cache.cache_root()
    assert issubclass(cache.CacheError, PaperstackError)
    assert issubclass(cache.CacheError, RuntimeError)
    with pytest.raises(SystemExit) as exc:
        _toy_cli(tmp_path).main(["demo", "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert "PAPERSTACK_CACHE" in capsys.readouterr().err
    assert bogus.read_text() == "x"


def test_dangling_model_link_is_not_taken_for_a_hub_id(tmp_path: Path) -> None:
    link = tmp_path / "model"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(PaperstackError, match="dangling symbolic link"):
        contract.check_model(str(link))


# --------------------------------------------------------------------------- a full disk


def test_disk_errors_are_recognised_through_libraries() -> None:
    assert "No space left" in (
        disk_error_text(OSError(errno.ENOSPC, "No space left on device")) or ""
    )
    assert disk_error_text(OSError(errno.EDQUOT, "Disk quota exceeded")) is not None
    assert disk_error_text(RuntimeError("I/O error: No space left on device (os error 28)"))
    assert disk_error_text(RuntimeError("PytorchStreamWriter failed writing file data/0"))
    assert disk_error_text(OSError(errno.ENOENT, "No such file")) is None
    assert disk_error_text(ValueError("bad")) is None


def test_cli_guard_turns_a_full_disk_into_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    @cli_guard("toy")
    def main() -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "/out/results.json")

    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("toy: error: No space left on device writing /out/results.json")


def test_atomic_write_on_a_full_disk_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "results.json"
    target.write_text("old\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        records.atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_save_figure_never_leaves_a_zero_byte_image(tmp_path: Path) -> None:
    class Failing:
        def savefig(self, buf: object, **kwargs: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        records.save_figure(Failing(), tmp_path / "plot.png")
    assert list(tmp_path.iterdir()) == []

    class Fine:
        def savefig(self, buf: object, **kwargs: object) -> None:
            assert kwargs["format"] == "png"
            buf.write(b"\x89PNG")  # type: ignore[attr-defined]

    assert records.save_figure(Fine(), tmp_path / "plot.png").read_bytes() == b"\x89PNG"


def test_jsonl_writer_cuts_a_torn_line_when_the_disk_fills(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlWriter(path, fsync=False) as log:
        log.write({"i": 1})
        real = log._fh

        class Torn:
            def __init__(self) -> None:
                self.closed = False

            def tell(self) -> int:
                return real.tell()

            def write(self, data: bytes) -> int:
                real.write(data[:5])
                real.flush()
                raise OSError(errno.ENOSPC, "No space left on device")

            def close(self) -> None:
                real.close()

        log._fh = Torn()  # type: ignore[assignment]
        with pytest.raises(OSError, match="No space"):
            log.write({"i": 2, "long": "x" * 50})
        log.write({"i": 3})
    assert [r["i"] for r in iter_jsonl(path)] == [1, 3]


# --------------------------------------------------------------------------- SIGTERM


def test_sigterm_runs_the_same_clean_up_as_ctrl_c(tmp_path: Path) -> None:
    marker = tmp_path / "cleaned"
    script = tmp_path / "prog.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            from paperstack.errors import cli_guard

            @cli_guard("toy")
            def main():
                try:
                    print("ready", flush=True)
                    time.sleep(60)
                except KeyboardInterrupt:
                    open({str(marker)!r}, "w").write("done")
                    raise
                return 0

            sys.exit(main())
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert err.strip() == "toy: terminated (SIGTERM)"
    assert marker.read_text() == "done"


def test_sigterm_inside_a_finalizer_still_stops_the_run(tmp_path: Path) -> None:
    """A SIGTERM handled inside an object's ``__del__`` (seen in CI: regex's ``Group.__del__``
    during a demo) was printed as "Exception ignored ... Terminated" and dropped, and the run
    went on. It is now delivered again once the finalizer has returned: exit 143, one line."""
    script = tmp_path / "prog.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, sys, time
            from paperstack.errors import cli_guard

            class Freed:
                def __del__(self):
                    os.kill(os.getpid(), signal.SIGTERM)
                    total = 0
                    for i in range(200000):  # the handler runs here, inside __del__
                        total += i

            @cli_guard("toy")
            def main():
                Freed()  # freed at once: its __del__ receives the signal
                print("after", flush=True)
                time.sleep(30)
                return 0

            sys.exit(main())
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip() == "toy: terminated (SIGTERM)"
    assert "Exception ignored" not in done.stderr
    assert time.monotonic() - started < 20  # not the 30 s sleep: the signal was not lost


# --------------------------------------------------------------------------- JSON and results


@pytest.mark.parametrize(
    "text", ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}', '{"x": 1e999}']
)
def test_strict_json_refuses_non_finite(text: str) -> None:
    with pytest.raises(ValueError, match=r"NaN|overflows"):
        strict_json_loads(text)


def test_check_refuses_non_finite_jsonl_and_names_nul_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"a": NaN}\n')
    with pytest.raises(ResultsFormatError, match="line 2"):
        list(iter_jsonl(path))
    path.write_bytes(b'{"a": 1}\n' + b"\0" * 64)
    with pytest.raises(ResultsFormatError, match="line 2: NUL bytes"):
        list(iter_jsonl(path))


def _written(tmp_path: Path) -> Path:
    rows = [
        Row.from_seeds("method", "acc", {0: 0.9, 1: 0.92, 2: 0.91}),
        Row.from_seeds("base", "acc", {0: 0.5, 1: 0.52, 2: 0.49}),
        Row.from_seeds("other", "acc", {0: 0.1, 1: 0.2, 2: 0.3}),
    ]
    claim = Claim.compare("beats", "method beats base by 0.3", rows, ("method", "acc"), "gt",
                          ("base", "acc"), margin=0.3)  # fmt: skip
    results = Results(manifest=Manifest(package="p", version="1"), rows=rows, claims=[claim])
    return write_results(tmp_path / "results.json", results)


def test_an_untouched_results_file_passes_and_carries_its_digest(tmp_path: Path) -> None:
    loaded = load_results(_written(tmp_path))
    assert loaded.digest is not None
    assert loaded.digest.startswith("sha256:")


def test_a_file_written_before_the_resumed_field_keeps_its_digest(tmp_path: Path) -> None:
    """A 0.3 file written before ``Manifest.resumed`` existed was stamped over a manifest
    without the key; it must still verify (every such committed report failed before)."""
    import hashlib

    path = _written(tmp_path)
    data = json.loads(path.read_text())
    for key in ("resumed", "preregistration"):
        assert data["manifest"].pop(key) is None
    data.pop("digest")
    canon = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data["digest"] = "sha256:" + hashlib.sha256(canon.encode("utf-8")).hexdigest()
    path.write_text(json.dumps(data))
    assert load_results(path).digest == data["digest"]


def _tamper(path: Path, edit: object) -> None:
    data = json.loads(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))


def test_check_fails_an_edited_statement(tmp_path: Path) -> None:
    path = _written(tmp_path)
    _tamper(path, lambda d: d["claims"][0].update(statement="method beats base by a mile"))
    with pytest.raises(ResultsFormatError, match="digest"):
        load_results(path)


def test_check_fails_a_lowered_margin_recomputed_with_compare(tmp_path: Path) -> None:
    path = _written(tmp_path)
    results = load_results(path)
    lowered = Claim.compare("beats", "method beats base by 0.3", results.rows, ("method", "acc"),
                            "gt", ("base", "acc"), margin=0.0)  # fmt: skip
    data = json.loads(path.read_text())
    data["claims"][0] = lowered.model_dump(mode="json")
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="digest"):
        load_results(path)


def test_check_fails_an_edited_row_no_claim_reads(tmp_path: Path) -> None:
    path = _written(tmp_path)

    def edit(d: dict) -> None:  # type: ignore[type-arg]
        d["rows"][2]["seeds"]["0"] = 0.4
        d["rows"][2]["value"] = (0.4 + 0.2 + 0.3) / 3

    _tamper(path, edit)
    with pytest.raises(ResultsFormatError, match="digest"):
        load_results(path)


def test_redact_secrets_in_urls_and_manifests() -> None:
    assert redact_secrets("https://user:pw@host:8000/v1") == "https://***@host:8000/v1"
    assert redact_secrets("http://h/v1?api_key=s3cret&x=1") == "http://h/v1?api_key=***&x=1"
    assert redact_secrets("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    m = Manifest.collect("p", "1", config={"base_url": "https://k:v@api.x/v1"},
                         command=["run", "--base-url", "https://k:v@api.x/v1"])  # fmt: skip
    assert "k:v" not in json.dumps(m.model_dump())


def test_a_gated_claim_says_what_it_measured() -> None:
    from paperstack.records import verdict_counts

    rows = [
        Row.from_seeds("base", "premise", {0: 0.0, 1: 0.01, 2: 0.02}),
        Row.from_seeds("method", "acc", {0: 0.2, 1: 0.21, 2: 0.19}),
        Row.from_seeds("baseline", "acc", {0: 0.5, 1: 0.52, 2: 0.49}),
    ]
    premise = Claim.compare("premise", "the toy shows it", rows, ("base", "premise"), "gt", 0.5)
    claim = Claim.compare("beats", "method beats baseline", rows, ("method", "acc"), "gt",
                          ("baseline", "acc"), requires=[premise])  # fmt: skip
    assert claim.verdict == "inconclusive"
    assert claim.measured_verdict == "not_held"
    assert claim.gated_against
    assert "measured alone: not held" in claim.premise_text()
    assert verdict_counts([premise, claim]).endswith("(1 gated, measured against)")
