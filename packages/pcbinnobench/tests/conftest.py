"""Shared fixtures: one thread (CI has 2 shared cores) and one task set built per session."""

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def taskset(tmp_path_factory):
    """The shipped task set, built once into a temporary folder (tasks/ and hidden/)."""
    from pcbinnobench.catalog import build_all

    root = tmp_path_factory.mktemp("taskset")
    build_all(root)
    return root


@pytest.fixture(scope="session")
def tasks(taskset):
    from pcbinnobench.tasks import load_tasks

    return load_tasks(taskset)


@pytest.fixture
def task(tasks):
    return next(t for t in tasks if t.id == "ldo_decap_vout")
