"""The README's API example runs and prints what it says."""

import re
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_readme_api_example_runs(capsys):
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## API in one example\n\n```python\n(.*?)```", text, re.S)
    assert block is not None
    exec(compile(block.group(1), str(README), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[-5:] == ["4*2=8", "3+8=11", "11-5=6", "Answer: 6", "None"]
    assert "backtracking" in out[0]
