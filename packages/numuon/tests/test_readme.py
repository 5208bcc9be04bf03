"""The README's API example runs as written."""

import re
from pathlib import Path


def test_readme_api_example_runs_as_written(capsys):
    text = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    api = text[text.index("## API") :]
    code = re.search(r"```python\n(.*?)```", api, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "of the matrices' parameters removed" in out
