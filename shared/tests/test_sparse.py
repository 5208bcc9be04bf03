"""paperstack.sparse: selection recall, paired timing, and the triton glue (optional)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


def test_the_module_imports_without_torch_when_triton_is_absent() -> None:
    code = (
        "import sys\n"
        "import paperstack.sparse as s\n"
        "assert s.HAVE_TRITON or 'torch' not in sys.modules, 'torch imported'\n"
        "print(s.HAVE_TRITON)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(importlib.util.find_spec("triton") is not None)


def test_selection_recall_counts_the_reference_kept() -> None:
    torch = pytest.importorskip("torch")
    from paperstack.sparse import selection_recall

    idx = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]])
    ok = torch.tensor([[True, True, True, False], [True, True, True, True]])
    ref = torch.tensor([[3, 2, 9, 0], [1, 2, 3, 4]])
    ref_ok = torch.tensor([[True, True, True, True], [False, False, False, False]])
    # row 0: 3 is selected but not ok, so only {2, 0} of {3, 2, 9, 0}; row 1: empty reference
    assert selection_recall(idx, ok, ref, ref_ok).tolist() == [0.5, 1.0]


def test_time_calls_times_every_system_in_every_repeat() -> None:
    from paperstack.sparse import time_calls

    calls_made: list[str] = []

    def call(name: str):
        return lambda: calls_made.append(name)

    times = time_calls({"a": call("a"), "b": call("b")}, repeats=3, best_of={"best": ("a", "b")})
    assert set(times) == {"a", "b", "best"}
    assert all(len(t) == 3 for t in times.values())
    assert calls_made == ["a", "b"] + ["a", "b"] * 3  # one warm-up each, then back to back
    assert times["best"] == [min(x, y) for x, y in zip(times["a"], times["b"], strict=True)]


def test_triton_is_unavailable_on_the_cpu_without_the_interpreter(monkeypatch) -> None:
    pytest.importorskip("torch")
    from paperstack import sparse

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert sparse.triton_available("cpu") is False
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert sparse.triton_available("cpu") is sparse.HAVE_TRITON


def test_online_softmax_step_folds_blocks_into_one_softmax() -> None:
    """Interpreted (TRITON_INTERPRET=1 in a subprocess, where there is no CUDA device)."""
    pytest.importorskip("triton")
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the interpreter is for CPU-only machines")
    code = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from paperstack.sparse import online_softmax_step, tl, triton

@triton.jit
def fold(q_ptr, k_ptr, v_ptr, out_ptr, n, scale, G: tl.constexpr, BLOCK: tl.constexpr,
         D: tl.constexpr):
    offs_g = tl.arange(0, G)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + offs_g[:, None] * D + offs_d[None, :])
    m = tl.full([G], float("-inf"), dtype=tl.float32)
    acc_l = tl.zeros([G], dtype=tl.float32)
    acc = tl.zeros([G, D], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        ok = offs < n
        k = tl.load(k_ptr + offs[:, None] * D + offs_d[None, :], mask=ok[:, None], other=0.0)
        v = tl.load(v_ptr + offs[:, None] * D + offs_d[None, :], mask=ok[:, None], other=0.0)
        m, acc_l, acc = online_softmax_step(q, k, v, ok, m, acc_l, acc, scale)
    tl.store(out_ptr + offs_g[:, None] * D + offs_d[None, :], acc / acc_l[:, None])

torch.manual_seed(0)
q, k, v = torch.randn(16, 16), torch.randn(50, 16), torch.randn(50, 16)
out = torch.empty(16, 16)
fold[(1,)](q, k, v, out, 50, 0.25, G=16, BLOCK=16, D=16)
ref = torch.softmax(q @ k.T * 0.25, -1) @ v
torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
