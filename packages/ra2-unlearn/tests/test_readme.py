"""The README's API example runs as written (on the cached micro fact model: seconds)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_api_example_runs(knowing, capsys):
    """``knowing`` has trained (or loaded) the same cached model the example asks for, so the
    block itself only unlearns 10 steps and evaluates."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## API in one example") :]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    code = block.group(1)
    assert '"tiny"' not in code  # never the 10-minute model
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)  # our own README block
    printed = capsys.readouterr().out.split()
    assert len(printed) == 2
    assert all(0.0 <= float(v) <= 1.0 for v in printed)
    assert namespace["res"].model is not namespace["model"]
