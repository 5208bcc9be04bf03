"""The README's API examples run as written: each ```python block, in its own namespace, in a
scratch working directory (the examples write relative paths)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_the_three_api_examples():
    assert len(_blocks()) == 3


def test_readme_examples_run(micro_path, tmp_path, monkeypatch):
    """micro_path: the cached micro model the training example pretrains (seconds, not minutes).
    Each block's own result is checked, so an example that silently does nothing fails."""
    monkeypatch.chdir(tmp_path)
    spaces = []
    for block in _blocks():
        namespace: dict = {}
        exec(compile(block, "README.md", "exec"), namespace)
        spaces.append(namespace)
    loss, demo, own = spaces
    assert loss["student"].grad is not None
    assert float(loss["loss"]) >= 0
    assert demo["result"].steps == 2
    assert own["record"]["steps_taken"] == 2
    assert (tmp_path / "runs" / "opct-model" / "model.safetensors").exists()
