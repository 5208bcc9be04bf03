import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_api_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(README), "exec"), {})
    shape, recall = capsys.readouterr().out.split("]) ")
    assert shape == "torch.Size([2, 8"
    assert 0.0 < float(recall) <= 1.0
