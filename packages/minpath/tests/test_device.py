"""``demo --device`` (toy and ``--real``): the CPU as before, ``cuda`` where torch sees one GPU.

No GPU here: ``cuda`` without one must be refused in one line before any work, and with CUDA
faked present the device must reach the fine-tunes (the run is stopped where it would load
the first model)."""

import pytest
import torch
from minpath import demo, real
from minpath.cli import main, one_cuda_device
from minpath.errors import MinPathError
from test_demo import _one_line_error

STOP = "stopped by the test where the first model would load"

# a demo that passes the device checks imports trl: see conftest.frozen_heap
pytestmark = pytest.mark.usefixtures("frozen_heap")


@pytest.fixture
def reached(monkeypatch):
    """The device each arm's fine-tunes would get; the run stops there (one-line error)."""
    got: dict[str, str] = {}

    def arm_load(self):
        got["real"] = self.device
        raise MinPathError(STOP)

    def run_seed(config, seed, base, device="cpu", log=None):
        got["toy"] = device
        raise MinPathError(STOP)

    monkeypatch.setattr(real._Arm, "load", arm_load)
    monkeypatch.setattr(demo, "base_path", lambda config, model: "no-base-needed")
    monkeypatch.setattr(demo, "run_seed", run_seed)
    return got


def _fake_cuda(monkeypatch, count):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "a faked GPU")


@pytest.mark.parametrize("arm", [[], ["--real"]], ids=["toy", "real"])
def test_cuda_without_a_gpu_is_one_line_before_any_work(arm, tmp_path, capsys, reached):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "out"
    err = _one_line_error(capsys, ["demo", *arm, "--quick", "--device", "cuda",
                                   "--out", str(out)])  # fmt: skip
    assert err.startswith("minpath: error: --device cuda: not available here"), err
    assert not out.exists()
    assert reached == {}


@pytest.mark.parametrize(("arm", "key"), [([], "toy"), (["--real"], "real")], ids=["toy", "real"])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_device_reaches_the_fine_tunes(arm, key, device, tmp_path, capsys, monkeypatch,
                                           reached):  # fmt: skip
    if device == "cuda":
        _fake_cuda(monkeypatch, 1)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["demo", *arm, "--quick", "--no-progress", "--device", device, "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()  # the toy arm logs its (faked) base first
    assert err.splitlines()[-1] == f"minpath: error: {STOP}", err  # past the device checks
    assert reached == {key: device}
    assert not out.exists()  # the failed first run leaves no empty folder


@pytest.mark.parametrize(("device", "count"), [("cuda", 2), ("cuda:1", 2), ("cuda:0", 3)])
def test_several_gpus_or_an_index_are_refused_in_one_line(device, count, tmp_path, capsys,
                                                          monkeypatch, reached):  # fmt: skip
    """trl trains on cuda:0 and splits each batch over every visible GPU (DataParallel)."""
    _fake_cuda(monkeypatch, count)
    err = _one_line_error(capsys, ["demo", "--real", "--quick", "--device", device,
                                   "--out", str(tmp_path / "out")])  # fmt: skip
    assert f"--device {device}:" in err
    assert "CUDA_VISIBLE_DEVICES" in err
    assert reached == {}


def test_one_gpu_and_the_cpu_pass_the_check(monkeypatch):
    _fake_cuda(monkeypatch, 1)
    for device in ("cpu", "cuda", "cuda:0"):
        one_cuda_device(device)
