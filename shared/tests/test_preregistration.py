"""Pre-registration and design history: a demo's claims are declared before it runs, ``paperstack
check`` holds a results.json to the declaration at its git revision, and report.md tells a reader
what was changed after an earlier run."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paperstack import preregistration as pre
from paperstack.cli import main as paperstack_main
from paperstack.records import Claim, Row, load_results

DECLARATION = """\
[demo]
seeds = [0, 1, 2]
stopping = "three seeds, fixed"

[demo.claims.beats]
lhs = ["method", "acc"]
rhs = ["baseline", "acc"]
op = "gt"
margin = {margin}

[demo.claims.floor]
lhs = ["method", "acc"]
rhs = 0.5
op = "ge"
margin = 0.0
"""

CLI = """\
from paperstack.contract import ContractCLI, Report, Run
from paperstack.records import Claim, Row

MARGIN = {margin}
cli = ContractCLI("toyp", "toy-prereg", "0.1.0", "toy")


@cli.demo(seeds=3, quick_seeds=2)
def demo(run: Run) -> Report:
    rows = [
        Row.from_seeds("method", "acc", {{k: 0.9 + 0.01 * k for k in run.seeds}}),
        Row.from_seeds("baseline", "acc", {{k: 0.5 + 0.02 * k for k in run.seeds}}),
    ]
    claims = [
        Claim.compare("beats", "method beats baseline", rows, ("method", "acc"), "gt",
                      ("baseline", "acc"), margin=MARGIN),
        Claim.compare("floor", "method above 0.5", rows, ("method", "acc"), "ge", 0.5),
    ]
    # a run's own config may use the flags' names (a dict of model sizes): it must not make
    # the run look like a --model run that the declaration does not bind
    return Report(rows, claims, config={{"model": {{"layers": 2}}, "quick": False}})
"""

CHANGELOG = """\
# Changelog

## 0.1.0

- first.

## Design history

- 2026-12-01 demo: margin: raised from 0 to 0.1 after the first run
  (exploratory: after seeing reported seeds)
- 2026-11-30 bench: budget: 5 repeats instead of 3
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def toy_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository holding a package ``toyprereg`` with a committed declaration."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    pkg = repo / "src" / "toyprereg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text(CLI.format(margin=0.0))
    (pkg / "preregistration.toml").write_text(DECLARATION.format(margin=0.0))
    (repo / "CHANGELOG.md").write_text(CHANGELOG)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "declare")
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo / "src"))
    # The tests rewrite cli.py between runs, often within the same second and at the same
    # size ("margin=0.2" -> "margin=0.0"): a .pyc written by the first import would pass
    # Python's mtime-and-size check and run the old source (the nox sessions write bytecode).
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    for name in [m for m in sys.modules if m.startswith("toyprereg")]:
        del sys.modules[name]
    return repo


def _run(repo: Path, out: Path, *extra: str) -> int:
    importlib.invalidate_caches()
    for name in [m for m in sys.modules if m.startswith("toyprereg")]:
        del sys.modules[name]
    module = importlib.import_module("toyprereg.cli")
    return int(module.cli.main(["demo", "--out", str(out), "--no-progress", *extra]))


def test_a_declared_run_embeds_its_declaration_and_passes_check(
    toy_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _run(toy_repo, out) == 0
    res = load_results(out)
    declared = res.manifest.preregistration
    assert declared is not None
    assert declared["path"] == "src/toyprereg/preregistration.toml"
    assert declared["declared"]["claims"]["beats"]["margin"] == 0.0
    assert paperstack_main(["check", str(out / "results.json")]) == 0
    printed = capsys.readouterr().out
    assert "claims match src/toyprereg/preregistration.toml at" in printed
    report = (out / "report.md").read_text()
    assert "## Pre-registration" in report
    assert "all match the declaration" in report
    assert "stopping rule: three seeds, fixed" in report
    # the design history lists this command's changes only, continuation joined
    assert "- 2026-12-01 (margin): raised from 0 to 0.1 after the first run (exploratory" in report
    assert "5 repeats" not in report


def test_check_fails_claims_changed_after_the_declared_revision(
    toy_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The margin is raised in the code and in the declaration in the same uncommitted tree
    that runs: the run's own copy matches, the declaration at its revision does not."""
    pkg = toy_repo / "src" / "toyprereg"
    (pkg / "cli.py").write_text(CLI.format(margin=0.1))
    (pkg / "preregistration.toml").write_text(DECLARATION.format(margin=0.1))
    out = tmp_path / "out"
    assert _run(toy_repo, out) == 0
    assert "warning" not in capsys.readouterr().err  # matches the file it read
    assert load_results(out).manifest.git_revision.endswith("-dirty")  # type: ignore[union-attr]
    with pytest.raises(SystemExit) as exc:
        paperstack_main(["check", str(out / "results.json")])
    assert exc.value.code == 2  # as every bad-input refusal of paperstack check
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "claim 'beats': margin 0.1 where 0.0 was declared" in err
    assert "claims must be declared before the run" in err
    # the report itself says so once `paperstack collect` refreshes it
    from paperstack.report import refresh_report

    assert refresh_report(out / "report.md", load_results(out), None)
    section = (out / "report.md").read_text().split("## Pre-registration")[1]
    assert "- claims: all match the declaration" in section  # the copy the run read
    assert "- `paperstack check`: FAILS: field 'claims': claim 'beats': margin 0.1" in section


def test_a_run_that_deviates_from_its_declaration_warns_and_fails_check(
    toy_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (toy_repo / "src" / "toyprereg" / "cli.py").write_text(CLI.format(margin=0.2))
    out = tmp_path / "out"
    assert _run(toy_repo, out) == 0
    err = capsys.readouterr().err
    assert "warning: claim 'beats': margin 0.2 where 0.0 was declared" in err
    assert "DEVIATE: claim 'beats': margin 0.2" in (out / "report.md").read_text()
    with pytest.raises(SystemExit):
        paperstack_main(["check", str(out / "results.json")])


def test_quick_runs_and_other_seeds_are_not_the_declared_experiment(
    toy_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (toy_repo / "src" / "toyprereg" / "cli.py").write_text(CLI.format(margin=0.2))
    assert _run(toy_repo, tmp_path / "q", "--quick") == 0
    assert "warning" not in capsys.readouterr().err
    assert paperstack_main(["check", str(tmp_path / "q" / "results.json")]) == 0
    assert "not enforced" in capsys.readouterr().out
    (toy_repo / "src" / "toyprereg" / "cli.py").write_text(CLI.format(margin=0.0))
    assert _run(toy_repo, tmp_path / "s", "--seed", "7") == 0
    assert paperstack_main(["check", str(tmp_path / "s" / "results.json")]) == 0
    assert "seeds [7, 8, 9] are not the declared [0, 1, 2]" in capsys.readouterr().out


def test_declare_prints_a_declaration_that_parses_back(
    toy_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    _run(toy_repo, out)
    capsys.readouterr()
    assert paperstack_main(["declare", str(out / "results.json"), "--stopping", "s"]) == 0
    text = capsys.readouterr().out
    decl = pre.parse(text)["demo"]
    assert decl.seeds == (0, 1, 2)
    assert decl.stopping == "s"
    assert decl.claims["beats"] == pre.DeclaredClaim(
        "beats", ("method", "acc"), ("baseline", "acc"), "gt", 0.0
    )
    assert decl.claims["floor"].rhs == 0.5


def _claims(margin: float = 0.0) -> list[Claim]:
    rows = [
        Row.from_seeds("m", "acc", {0: 0.9, 1: 0.91, 2: 0.92}),
        Row.from_seeds("b", "acc", {0: 0.5, 1: 0.52, 2: 0.51}),
    ]
    return [Claim.compare("c", "m beats b", rows, ("m", "acc"), "gt", ("b", "acc"), margin=margin)]


def test_deviations_name_each_difference() -> None:
    decl = pre.Declaration(
        "demo",
        {
            "c": pre.DeclaredClaim("c", ("m", "acc"), ("b", "acc"), "gt", 0.0),
            "d": pre.DeclaredClaim("d", ("m", "acc"), 0.5, "ge", 0.0),
            "e": pre.DeclaredClaim("e", ("m", "acc"), 0.5, "ge", 0.0, optional=True),
        },
    )
    assert pre.deviations(_claims(), decl, complete=False) == []
    assert pre.deviations(_claims(), decl) == ["declared claim 'd' is missing"]
    assert pre.deviations(_claims(0.05), decl, complete=False) == [
        "claim 'c': margin 0.05 where 0.0 was declared"
    ]
    empty = pre.Declaration("demo", {})
    assert pre.deviations(_claims(), empty) == ["claim 'c' is not declared"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[demo\n", "not valid TOML"),
        ("[demo]\nseeds = ['a']\n", "[demo].seeds: expected a list of integers"),
        ("[demo.claims.x]\nlhs = ['a', 'b']\nrhs = 1.0\nop = '>'\n", "[demo].claims.x.op: '>'"),
        ("[demo.claims.x]\nrhs = 1.0\nop = 'gt'\n", "missing field 'lhs'"),
        ("[demo.claims.x]\nlhs = ['a']\nrhs = 1.0\nop = 'gt'\n", "expected [system, metric]"),
        ("[demo.claims.x]\nlhs = ['a', 'b']\nrhs = 1\nop = 'gt'\nmargn = 1\n", "'margn'"),
    ],
)
def test_a_malformed_declaration_is_one_line_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(pre.PreregistrationError, match=None) as exc:
        pre.parse(text, "pkg/preregistration.toml")
    assert str(exc.value).startswith("pkg/preregistration.toml")
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_design_history_parses_the_section_and_refuses_typos() -> None:
    changes = pre.design_history(CHANGELOG)
    assert [(c.date, c.command, c.kind) for c in changes] == [
        ("2026-11-30", "bench", "budget"),
        ("2026-12-01", "demo", "margin"),
    ]
    assert changes[1].text.endswith("(exploratory: after seeing reported seeds)")
    assert pre.design_history("# Changelog\n\n## 0.1\n\n- a line\n") == []
    bad = CHANGELOG + "- 2026-12-02 demo: vibes: changed\n"
    with pytest.raises(pre.PreregistrationError, match=r"CHANGELOG.md:12: .*kind one of"):
        pre.design_history(bad)
    none = pre.history_section([], "demo")
    assert "No change of design" in none
    # a variant's table names its own entries: listed in its report, not in the toy demo's
    real = pre.design_history(CHANGELOG + "- 2026-12-06 demo --real: task: easier problems\n")
    assert (real[-1].command, real[-1].kind) == ("demo --real", "task")
    assert "easier problems" in pre.history_section(real, "demo --real")
    assert "easier problems" not in pre.history_section(real, "demo")
    with pytest.raises(pre.PreregistrationError, match="kind one of"):
        pre.design_history(CHANGELOG + "- 2026-12-06 demo -real: task: a typo in the flag\n")
    assert "not available" in pre.history_section(None, "demo")


def test_changes_recorded_after_a_run_are_listed_apart() -> None:
    """A report refreshed by ``paperstack collect`` says which design changes came after its
    run (dated after the day it started): they are not in its results."""
    from types import SimpleNamespace

    changes = pre.design_history(CHANGELOG)  # 2026-11-30 bench, 2026-12-01 demo
    late = pre.Change("2026-12-03", "demo", "claim", "a claim added after the run")
    run = SimpleNamespace(manifest=SimpleNamespace(started="2026-12-01T10:00:00+00:00"))
    later = pre.changes_since(run, [*changes, late])
    assert later == [late]  # the same day as the run counts as before it
    text = pre.history_section([*changes, late], "demo", later=later)
    before, _, after = text.partition("**Recorded after this run**")
    assert "2026-12-01 (margin)" in before
    assert "2026-12-03" not in before
    assert "2026-12-03 (claim): a claim added after the run" in after
    only_late = pre.history_section([late], "demo", later=[late])
    assert "No change of design" in only_late
    assert "Recorded after this run" in only_late
    assert "Recorded after" not in pre.history_section(changes, "demo")
    undated = SimpleNamespace(manifest=SimpleNamespace(started=""))
    assert pre.changes_since(undated, [late]) == []


def test_a_change_on_the_day_of_a_run_is_ordered_by_its_time() -> None:
    """A design-history entry may give its time of day (UTC): on the run's own day, one
    recorded after the run started is listed as after it; one without a time stays before."""
    from types import SimpleNamespace

    text = CHANGELOG + (
        "- 2026-12-07 00:46 UTC demo --real: design: a second design, declared before the rerun\n"
        "- 2026-12-07 02:30 UTC demo --real: claim: a claim added once the rerun was seen\n"
        "- 2026-12-07 demo --real: task: no time given\n"
    )
    changes = pre.design_history(text)
    real = [c for c in changes if c.command == "demo --real"]
    assert [c.time for c in real] == ["", "00:46", "02:30"]  # sorted by date, then time
    assert real[1].when == "2026-12-07 00:46 UTC"
    # started 00:47 UTC; the same instant written in another zone reads the same
    for started in ("2026-12-07T00:47:30+00:00", "2026-12-06T19:47:30-05:00"):
        run = SimpleNamespace(manifest=SimpleNamespace(started=started))
        assert [c.time for c in pre.changes_since(run, changes)] == ["02:30"]
    section = pre.history_section(changes, "demo --real", later=pre.changes_since(run, changes))
    before, _, after = section.partition("**Recorded after this run**")
    assert "2026-12-07 00:46 UTC (design)" in before
    assert "2026-12-07 (task)" in before
    assert "2026-12-07 02:30 UTC (claim)" in after
    assert "02:30" not in before
    with pytest.raises(pre.PreregistrationError, match="HH:MM UTC"):
        pre.design_history(CHANGELOG + "- 2026-12-07 25:00 UTC demo: design: no such hour\n")


def test_collect_refreshes_derived_sections_of_older_reports(tmp_path: Path) -> None:
    """A report written before the core gained a section gets it from ``paperstack collect``
    without rerunning the demo; the intro and figures it had are kept."""
    from paperstack.records import Manifest, Results, write_results
    from paperstack.report import write_index

    reports = tmp_path / "reports" / "toy"
    reports.mkdir(parents=True)
    (tmp_path / "packages" / "toy").mkdir(parents=True)
    (tmp_path / "packages" / "toy" / "CHANGELOG.md").write_text(CHANGELOG)
    res = Results(
        manifest=Manifest(package="toy", version="0.1", command=["toy", "demo"]),
        rows=[
            Row.from_seeds("m", "acc", {0: 0.9, 1: 0.91, 2: 0.92}),
            Row.from_seeds("b", "acc", {0: 0.5, 1: 0.52, 2: 0.51}),
        ],
        claims=_claims(),
    )
    write_results(reports, res)
    old = "# toy\n\nAn intro.\n\n## Results\n\nrows\n\n## Claims\n\nold table\n\n## Run\n\n- x\n"
    (reports / "report.md").write_text(old)
    write_index(tmp_path / "reports")
    new = (reports / "report.md").read_text()
    assert new.startswith("# toy\n\nAn intro.\n\n## Results\n\nrows\n\n## Claims\n\n| claim |")
    assert "old table" not in new
    assert "## Pre-registration\n\n_none: this run predates" in new
    assert "- 2026-12-01 (margin): raised from 0 to 0.1" in new
    assert new.index("## Design history") < new.index("## Run")
    write_index(tmp_path / "reports")
    assert (reports / "report.md").read_text() == new  # idempotent
    assert new.count("## Design history") == 1


def test_a_non_editable_install_inside_the_checkout_names_the_tracked_file(
    toy_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nox -s reproduce`` installs the package into a venv inside the checkout: the manifest
    must name the tracked declaration, which ``paperstack check`` can find at the revision."""
    site = toy_repo / ".venv" / "site"
    shutil.copytree(toy_repo / "src" / "toyprereg", site / "toyprereg")
    (toy_repo / ".gitignore").write_text(".venv/\n")
    monkeypatch.syspath_prepend(str(site))
    out = tmp_path / "out"
    assert _run(toy_repo, out) == 0
    assert str(sys.modules["toyprereg"].__file__).startswith(str(site))  # the installed copy ran
    res = load_results(out)
    assert res.manifest.preregistration is not None
    assert res.manifest.preregistration["path"] == "src/toyprereg/preregistration.toml"
    assert "at " in pre.check(res, out / "results.json")
    # and the design history comes from the checkout's CHANGELOG, which no wheel carries
    assert "(margin): raised from 0 to 0.1" in (out / "report.md").read_text()


def test_a_variant_table_binds_the_runs_that_set_its_flag() -> None:
    text = DECLARATION.format(margin=0.0) + (
        '\n["demo --real"]\ncommand = "demo"\nwhen = "real"\nseeds = [0]\n\n'
        '["demo --real".claims.real_beats]\nlhs = ["m", "acc"]\nrhs = 0.5\nop = "gt"\n'
    )
    decls = pre.parse(text)
    assert pre.select(decls, "demo", {"real": False}) is decls["demo"]
    real = pre.select(decls, "demo", {"real": True})
    assert real is not None
    assert real.name == "demo --real"
    assert list(real.claims) == ["real_beats"]
    assert pre.select(decls, "bench", {}) is None
    assert pre.from_json("demo", real.to_json()).when == "real"


def test_a_script_run_finds_its_package_from_the_source_file(toy_repo: Path) -> None:
    """``python path/to/pkg/cli.py demo`` makes the module ``__main__``: the declaration and
    the CHANGELOG are still found, from the function's source file."""
    cli_file = toy_repo / "src" / "toyprereg" / "cli.py"
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile("def demo(run):\n    return run\n", str(cli_file), "exec"), namespace)
    func = namespace["demo"]
    assert func.__module__ == "__main__"  # type: ignore[attr-defined]
    assert pre.package_dir(func) == (toy_repo / "src" / "toyprereg").resolve()  # type: ignore[arg-type]
    declared = pre.fingerprint(func, "demo")  # type: ignore[arg-type]
    assert declared is not None
    assert declared["path"] == "src/toyprereg/preregistration.toml"
    assert "(margin): raised from 0 to 0.1" in pre.history_for(func, "demo")  # type: ignore[arg-type]


def test_declare_quotes_claim_ids_with_dots() -> None:
    from paperstack.records import Manifest, Results

    rows = [
        Row.from_seeds("m", "acc", {0: 0.9, 1: 0.91, 2: 0.92}),
        Row.from_seeds("b", "acc", {0: 0.5, 1: 0.52, 2: 0.51}),
    ]
    claim = Claim.compare("front_c0.125", "s", rows, ("m", "acc"), "gt", ("b", "acc"))
    res = Results(manifest=Manifest(package="p", version="0"), rows=rows, claims=[claim])
    text = pre.to_toml(res, "demo")
    assert '[demo.claims."front_c0.125"]' in text
    assert list(pre.parse(text)["demo"].claims) == ["front_c0.125"]


def test_a_declaration_broken_at_the_revision_falls_back_to_the_embedded_one(
    toy_repo: Path, tmp_path: Path
) -> None:
    pkg = toy_repo / "src" / "toyprereg"
    good = (pkg / "preregistration.toml").read_text()
    (pkg / "preregistration.toml").write_text(
        good.replace("[demo.claims.beats]", "[demo.claims.a=b]")
    )
    _git(toy_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "broken")
    (pkg / "preregistration.toml").write_text(good)  # fixed in the tree that runs
    out = tmp_path / "out"
    assert _run(toy_repo, out) == 0
    said = pre.check(load_results(out), out / "results.json")
    assert (
        said
        == "claims match the declaration it embeds (the file at its revision is not valid TOML)"
    )


def test_a_variant_run_reads_the_history_of_its_table() -> None:
    """``paperstack collect`` lists a `demo --real` run's own design history, not the toy's."""
    from types import SimpleNamespace

    from paperstack.report import _command_of

    def run(pre_reg: dict[str, object] | None) -> object:
        manifest = SimpleNamespace(preregistration=pre_reg, command=["prog", "demo", "--real"])
        return SimpleNamespace(manifest=manifest)

    assert _command_of(run({"command": "demo", "table": "demo --real"})) == "demo --real"
    assert _command_of(run({"command": "demo", "table": "demo"})) == "demo"
    assert _command_of(run(None)) == "demo"


def test_the_report_names_the_table_a_variant_run_was_held_to() -> None:
    """A `demo --real` run's Pre-registration section names ``["demo --real"]``, the table its
    claims were checked against, not the command's toy table ``[demo]``."""
    from paperstack.records import Manifest, Results

    rows = [Row.from_seeds("m", "acc", {0: 0.9, 1: 0.91, 2: 0.92})]
    claim = Claim.compare("real_beats", "s", rows, ("m", "acc"), "gt", 0.5)
    decl = pre.parse(
        '["demo --real"]\ncommand = "demo"\nwhen = "real"\nseeds = [0, 1, 2]\n\n'
        '["demo --real".claims.real_beats]\nlhs = ["m", "acc"]\nrhs = 0.5\nop = "gt"\n'
    )["demo --real"]
    fingerprint = {"path": "p.toml", "sha256": "0" * 64, "command": "demo",
                   "table": "demo --real", "binding": True, "declared": decl.to_json()}  # fmt: skip
    manifest = Manifest(package="p", version="0", config={"real": True, "seeds": [0, 1, 2]},
                        preregistration=fingerprint)  # fmt: skip
    section = pre.preregistration_section(Results(manifest=manifest, rows=rows, claims=[claim]))
    assert '(sha256 000000000000), `["demo --real"]`' in section
    assert "all match the declaration" in section
    plain = dict(fingerprint, table="demo")
    manifest = Manifest(package="p", version="0", config={"seeds": [0, 1, 2]},
                        preregistration=plain)  # fmt: skip
    assert "`[demo]`" in pre.preregistration_section(Results(manifest=manifest, rows=rows))
