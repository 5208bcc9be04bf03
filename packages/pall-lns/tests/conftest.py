import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def smoke_dir(tmp_path_factory):
    """One smoke-size instance per family (seeded), shared by the suite."""
    from pall_lns.generators import FAMILIES, generate

    out = tmp_path_factory.mktemp("instances")
    for fam in FAMILIES:
        generate(fam, "smoke", 7, out)
    return out


@pytest.fixture
def write_lp(tmp_path):
    def _write(name: str, text: str):
        p = tmp_path / name
        p.write_text(text)
        return p

    return _write


@pytest.fixture
def knapsack_lp(tmp_path):
    """A three-item knapsack SCIP proves optimal (9: x and y) in milliseconds."""
    p = tmp_path / "knap.lp"
    p.write_text(
        "Maximize\n obj: 5 x + 4 y + 3 z\nSubject To\n c1: 2 x + 3 y + z <= 5\n"
        "Binary\n x y z\nEnd\n"
    )
    return p
