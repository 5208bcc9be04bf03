"""The README's API example runs, and the shipped task set is built into the cache once."""

import re
from pathlib import Path

from pcbinnobench.tasks import default_root, load_tasks

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_api_example_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path / "cache"))
    block = re.search(r"## API in one example\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert block is not None
    exec(compile(block.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("heuristic objective False")
    assert out[1].startswith("heuristic guided True")
    assert out[2].startswith("oracle objective True")
    root = default_root(tmp_path / "cache")
    stamp = (root / "complete").stat().st_mtime_ns
    assert default_root(tmp_path / "cache") == root  # built once, then reused
    assert (root / "complete").stat().st_mtime_ns == stamp
    assert [t.id for t in load_tasks(root)][:1] == ["eeprom_add_j2"]
