"""The conformance suite judged on two small command lines: one that keeps the contract passes
every check; one with the faults users met (a traceback on GPT-2, exit 0 having done nothing, a
refusal that names nothing) fails exactly the checks that cover them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from paperstack.contract import ContractCLI, Report, Run
from paperstack.errors import PaperstackError
from paperstack.records import Claim, Row
from paperstack.testing import conformance
from paperstack.testing.conformance import (
    Check,
    ConformanceError,
    conformance_checks,
    load_declaration,
)

DECLARATION = """
[project]
name = "toy-method"

[tool.paperstack.conformance.commands.demo]
args = ["--quick", "--no-progress"]
architectures = ["llama", "qwen2", "qwen3", "mistral"]
writes = "results.json"

[tool.paperstack.conformance.commands.score]
architectures = ["*"]
needs = ["tokenizer", "chat_template"]
"""


def _cli(faulty: bool) -> ContractCLI:
    cli = ContractCLI("toy", "toy-method", "0.0.1", "A toy method.")

    def load(path: str) -> dict[str, object]:
        from paperstack.checkpoint import check_model_dir

        folder = check_model_dir(path)
        config = json.loads((folder / "config.json").read_text())
        if not any(p.name.startswith("tokenizer") for p in folder.iterdir()):
            raise PaperstackError(f"--model {path}: no tokenizer saved with the model")
        return dict(config)

    @cli.demo(model="a causal LM folder")
    def demo(run: Run) -> Report:
        rows = [
            Row(system="a", metric="m", value=1.0, n=1),
            Row(system="b", metric="m", value=0.0, n=1),
        ]
        if run.model is not None:
            config = load(run.model)
            if config["model_type"] == "gpt2":
                if faulty:
                    raise TypeError("'NoneType' object is not iterable")
                raise PaperstackError(f"--model {run.model}: gpt2 (Conv1D layers) is not supported")
        claims = [Claim.compare("a_gt_b", "a beats b", rows, ("a", "m"), "gt", ("b", "m"))]
        return Report(rows, claims)

    def score_args(p: object) -> None:
        p.add_argument("--model", required=True)  # type: ignore[attr-defined]

    @cli.command("score", "score a model", score_args)
    def score(args: object) -> int:
        from paperstack.contract import check_model

        path = check_model(args.model)  # type: ignore[attr-defined]
        assert path is not None
        load(path)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
        if not tok.chat_template:
            if faulty:
                print("toy: error: cannot continue", file=sys.stderr)
                raise SystemExit(2)
            raise PaperstackError(f"--model {path}: its tokenizer has no chat template")
        if not faulty:
            print("scored")
        return 0

    return cli


@pytest.fixture
def declaration(tmp_path: Path) -> conformance.Declaration:
    path = tmp_path / "pyproject.toml"
    path.write_text(DECLARATION)
    decl = load_declaration(path)
    zoo_only = tuple(n for n in decl.checkpoints if n != "smollm2")  # SmolLM2 has its own tests
    return conformance.Declaration(decl.dist, decl.commands, decl.expected_failures, zoo_only)


def _outcomes(cli: ContractCLI, decl: conformance.Declaration, request: pytest.FixtureRequest,
              tmp_path: Path) -> dict[str, str]:  # fmt: skip
    results: dict[str, str] = {}
    for i, check in enumerate(conformance_checks(cli, decl)):
        if check.id in ("demo-quick", "full-disk[demo]"):
            continue  # need the console script; run on the real paperstack CLI (test_conformance)
        folder = tmp_path / f"c{i}"
        folder.mkdir()
        try:
            check.run(request, folder)
            results[check.id] = "pass"
        except ConformanceError as exc:
            results[check.id] = f"fail: {exc}"
    return results


def test_a_command_line_that_keeps_the_contract_passes_every_check(
    declaration: conformance.Declaration, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    results = _outcomes(_cli(faulty=False), declaration, request, tmp_path)
    failed = {k: v for k, v in results.items() if v != "pass"}
    assert not failed
    assert {"help", "declared", "out-file[demo]", "out-readonly[demo]"} <= set(results)
    assert {"out-empty[demo]", "seed-range[demo]", "cache-file"} <= set(results)
    assert {f"model[demo-{n}]" for n in declaration.checkpoints} <= set(results)
    assert {f"model[score-{n}]" for n in declaration.checkpoints} <= set(results)


def test_the_faults_users_met_fail_the_checks_that_cover_them(
    declaration: conformance.Declaration, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    results = _outcomes(_cli(faulty=True), declaration, request, tmp_path)
    failed = {k for k, v in results.items() if v != "pass"}
    silent = {f"model[score-{n}]" for n in ("llama", "qwen2", "qwen3", "mistral")}
    assert failed == {"model[demo-gpt2]", "model[score-gpt2]", *silent}
    assert "traceback: TypeError" in results["model[demo-gpt2]"]
    assert "names none of" in results["model[score-gpt2]"]
    assert all("exit 0 having printed and written nothing" in results[k] for k in silent)


def test_undeclared_commands_and_stale_expected_failures_fail_declared(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[project]\nname = "toy-method"\n'
        '[tool.paperstack.conformance.expected-failures]\n"model[gone-llama]" = "old"\n'
    )
    checks = {c.id: c for c in conformance_checks(_cli(faulty=False), load_declaration(path))}
    with pytest.raises(ConformanceError, match=r"expected failures name no check.*gone-llama"):
        checks["declared"].run(request, tmp_path)
    path.write_text('[project]\nname = "toy-method"\n')
    checks = {c.id: c for c in conformance_checks(_cli(faulty=False), load_declaration(path))}
    with pytest.raises(ConformanceError, match=r"not declared.*'score'"):
        checks["declared"].run(request, tmp_path)


def test_a_bad_declaration_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.paperstack.conformance.commands.demo]\nneeds = ['gpu']\n")
    with pytest.raises(ConformanceError, match=r"commands\.demo\.needs"):
        load_declaration(path)


def test_expected_failures_become_strict_xfails(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        DECLARATION + "\n[tool.paperstack.conformance.expected-failures]\n"
        '"model[demo-gpt2]" = "TypeError traceback"\n'
    )
    test = conformance.conformance_tests(_cli(faulty=True), path)
    params = test.pytestmark[0].args[1]  # type: ignore[attr-defined]
    marked = {p.id: p.marks for p in params if any(m.name == "xfail" for m in p.marks)}
    slow = {p.id for p in params if any(m.name == "slow" for m in p.marks)}
    assert slow == {"model[demo-smollm2]", "model[score-smollm2]"}  # a 135M model: minutes
    assert set(marked) == {"model[demo-gpt2]"}
    xfail = marked["model[demo-gpt2]"][0]
    assert xfail.kwargs["strict"] is True
    assert xfail.kwargs["reason"] == "TypeError traceback"
    assert all(isinstance(p.values[0], Check) for p in params)


def test_a_command_declared_slow_runs_its_supported_checkpoints_with_the_slow_tests(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(DECLARATION.replace('needs = ["tokenizer", "chat_template"]', "slow = true"))
    test = conformance.conformance_tests(_cli(faulty=False), path)
    params = test.pytestmark[0].args[1]  # type: ignore[attr-defined]
    slow = {p.id for p in params if any(m.name == "slow" for m in p.marks)}
    supported = {f"model[score-{n}]" for n in ("llama", "qwen2", "qwen3", "gpt2", "mistral")}
    assert slow == supported | {"model[demo-smollm2]", "model[score-smollm2]"}
