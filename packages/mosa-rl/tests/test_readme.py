"""The README's Python examples run as written (0.2's raised NameError on undefined names)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_readme_has_python_examples():
    assert BLOCKS


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the example writes to ./out
    namespace: dict[str, object] = {"__name__": "__readme__"}
    exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), namespace)
    if "trainer" in namespace:
        assert namespace["trainer"].state.global_step == 2
        assert float(namespace["loss"]) >= 0.0
