"""The base install stays light: no torch, transformers or httpx unless an extra asks for them."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

HEAVY = ("torch", "transformers", "tokenizers", "datasets", "httpx", "sentence_transformers")


def test_base_requirements_pull_no_heavy_library() -> None:
    reqs = metadata.requires("paperstack-core") or []
    base = [r for r in reqs if "extra ==" not in r]
    names = {r.split(";")[0].split(">")[0].split("=")[0].split("[")[0].strip() for r in base}
    assert names.isdisjoint({"torch", "transformers", "tokenizers", "datasets", "httpx"}), base
    extras = metadata.metadata("paperstack-core").get_all("Provides-Extra") or []
    assert {"torch", "http", "embed"} <= set(extras)


def test_light_modules_import_without_heavy_libraries() -> None:
    code = (
        "import sys\n"
        "import paperstack, paperstack.records, paperstack.report, paperstack.stats\n"
        "import paperstack.tasks, paperstack.llm, paperstack.errors, paperstack.cli\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
