"""The README's Python examples run as written (each ```python block, in order, in one
namespace, as a reader pasting them would), and print what the text says they print."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)


def test_every_readme_python_block_runs_as_written(capsys):
    blocks = _python_blocks()
    assert blocks, "the README has no python example"
    namespace: dict = {"__name__": "readme"}
    for k, block in enumerate(blocks):
        exec(compile(block, f"README.md python block {k}", "exec"), namespace)
    # The API example: one progress advantage per line of the solution, their sum, and the
    # attributed step (an index into those steps).
    steps = namespace["steps"]
    assert steps.shape == (3,)
    assert np.all(np.isfinite(steps))
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert printed.endswith(f" {int(namespace['attribute_failure'](steps))}")
