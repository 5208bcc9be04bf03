"""The README's API example runs as written."""

import re
from pathlib import Path


def test_readme_api_example_runs(capsys):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    section = text.split("## API in one example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    exec(compile(code.group(1), "README.md", "exec"), {})
    accuracy = float(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0.0 <= accuracy <= 1.0
