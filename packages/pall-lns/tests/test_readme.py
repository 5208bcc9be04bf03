"""The README's API example, run as a user would: a script without a ``__main__`` guard."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _api_example() -> str:
    text = README.read_text()
    section = text[text.index("## API in one example") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README has no API example"
    return match.group(1)


def test_readme_api_example_runs_async_without_a_main_guard(tmp_path):
    code = _api_example()
    assert "__main__" not in code  # as a user pastes it
    assert "async_select=True" in code
    script = tmp_path / "example.py"
    script.write_text(code.replace("time_limit=10", "time_limit=2"))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "BrokenProcessPool" not in proc.stderr
    fields = dict(re.findall(r"(\w+)=(\S+)", proc.stdout))
    assert int(fields["iterations"]) >= 1
    assert int(fields["fallbacks"]) == 0  # the selector worker answered every time
