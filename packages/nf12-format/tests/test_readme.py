"""The README's API example runs as written (offline: its model is a zoo checkpoint)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def api_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## API in one example", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README: no python block under 'API in one example'"
    return match.group(1)


def test_readme_api_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(api_example(), str(README), "exec"), namespace)
    import nf12.nn

    model = namespace["model"]
    assert sum(isinstance(m, nf12.nn.NF12Linear) for m in model.modules()) > 0  # type: ignore[attr-defined]
    assert (tmp_path / "my-nf12-model" / "config.json").is_file()
