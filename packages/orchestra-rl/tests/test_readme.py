"""The README's API example runs as written."""

import re
from pathlib import Path


def test_readme_api_example_runs(capsys):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has no python example"
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "orchestra_rl" in out
    assert "random_broadcast" in out
