import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_a_small_market(tmp_path, monkeypatch, capsys):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), "README.md", "exec"), {"__name__": "readme"})
    first, second = capsys.readouterr().out.splitlines()[:2]
    assert first.startswith("32 decisions,")
    assert second.startswith("{'survival-00': ")
    assert (tmp_path / "runs" / "api" / "ledger.jsonl").is_file()
