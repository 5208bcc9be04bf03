import json
import struct

import pytest
import torch
from nf12.errors import Nf12Error
from nf12.files import compress_file, decompress_file, inspect_file, iter_nf12
from nf12.format import NF12Tensor
from safetensors import safe_open
from safetensors.torch import save_file


@pytest.fixture
def checkpoint(tmp_path, gaussian):
    state = {
        "layer.weight": gaussian,
        "layer.bias": gaussian[0].clone(),
        "emb.weight": (gaussian[:50] * 30).contiguous(),
        "position_ids": torch.arange(7),
        "odd.weight": gaussian[:, :13].contiguous(),
        "tiny.weight": gaussian[:5, :13].contiguous(),  # NF12 would be larger: verbatim
    }
    path = tmp_path / "model.safetensors"
    save_file(state, str(path), metadata={"format": "pt"})
    return path, state


def test_compress_then_decompress_gives_the_byte_identical_file(tmp_path, checkpoint):
    src, state = checkpoint
    packed = tmp_path / "model.nf12.safetensors"
    report = compress_file(src, packed)
    kinds = {e["name"]: e["kind"] for e in report.entries}
    assert kinds["layer.weight"] == "nf12"
    assert kinds["odd.weight"] == "nf12"
    assert kinds["layer.bias"] == "verbatim"
    assert kinds["position_ids"] == "verbatim"
    assert kinds["tiny.weight"] == "verbatim"
    assert report.output_bytes < report.source_bytes
    back = tmp_path / "back.safetensors"
    assert decompress_file(packed, back) is True
    assert back.read_bytes() == src.read_bytes()
    with safe_open(str(back), framework="pt") as fh:
        for name, tensor in state.items():
            assert torch.equal(fh.get_tensor(name), tensor)


def test_nf12_file_is_plain_safetensors_with_the_index(tmp_path, checkpoint):
    src, _ = checkpoint
    packed = tmp_path / "m.nf12.safetensors"
    compress_file(src, packed)
    with safe_open(str(packed), framework="pt") as fh:
        meta = fh.metadata()
        assert meta["nf12.magic"] == "NF12"
        assert meta["nf12.version"] == "1"
        assert "layer.weight:nf12.sm" in fh.keys()  # noqa: SIM118
    items = dict(iter_nf12(packed))
    assert isinstance(items["layer.weight"], NF12Tensor)
    rows = {r["name"]: r for r in inspect_file(packed)}
    assert rows["layer.weight"]["coverage"] > 0.99
    assert 12.0 < rows["layer.weight"]["bits_per_weight"] < 12.3
    assert rows["layer.bias"]["bits_per_weight"] == 16.0
    plain = {r["name"]: r for r in inspect_file(src)}
    assert plain["layer.weight"]["kind"] == "nf12-candidate"


def _rewrite_metadata(path, out, **changes):
    with safe_open(str(path), framework="pt") as fh:
        meta = dict(fh.metadata())
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118
    meta.update(changes)
    save_file(tensors, str(out), metadata=meta)


def test_rejects_wrong_magic_version_and_tampered_header(tmp_path, checkpoint):
    src, _ = checkpoint
    packed = tmp_path / "m.nf12.safetensors"
    compress_file(src, packed)
    with pytest.raises(Nf12Error, match="not an NF12 file"):
        decompress_file(src, tmp_path / "x.safetensors")
    _rewrite_metadata(packed, tmp_path / "v2.safetensors", **{"nf12.version": "2"})
    with pytest.raises(Nf12Error, match=r"nf12\.version"):
        decompress_file(tmp_path / "v2.safetensors", tmp_path / "x.safetensors")
    index = json.loads(json.loads(_header(packed))["__metadata__"]["nf12.index"])
    index[0]["sha256"] = "0" * 64
    _rewrite_metadata(packed, tmp_path / "t.safetensors", **{"nf12.index": json.dumps(index)})
    with pytest.raises(Nf12Error, match="index_sha256"):
        decompress_file(tmp_path / "t.safetensors", tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


def _header(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return raw[8 : 8 + n].decode()


def test_rejects_truncated_and_corrupted_files(tmp_path, checkpoint):
    src, _ = checkpoint
    packed = tmp_path / "m.nf12.safetensors"
    compress_file(src, packed)
    data = packed.read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) - 100])
    with pytest.raises(Nf12Error, match=r"cut\.safetensors"):
        decompress_file(tmp_path / "cut.safetensors", tmp_path / "x.safetensors")
    (tmp_path / "tiny.safetensors").write_bytes(data[:5])
    with pytest.raises(Nf12Error):
        decompress_file(tmp_path / "tiny.safetensors", tmp_path / "x.safetensors")
    header = json.loads(_header(packed))
    begin = header["layer.weight:nf12.sm"]["data_offsets"][0] + 8 + len(_header(packed).encode())
    flipped = bytearray(data)
    flipped[begin + 11] ^= 0x01  # one mantissa bit of one weight
    (tmp_path / "flip.safetensors").write_bytes(bytes(flipped))
    with pytest.raises(Nf12Error, match="sha256"):
        decompress_file(tmp_path / "flip.safetensors", tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()
    with pytest.raises(Nf12Error, match="sha256"):
        list(iter_nf12(tmp_path / "flip.safetensors"))


def test_rejects_non_bf16_and_nan_unless_asked(tmp_path, gaussian):
    f32 = tmp_path / "f32.safetensors"
    save_file({"w": gaussian.float()}, str(f32))
    with pytest.raises(Nf12Error, match="F32 is not BF16"):
        compress_file(f32, tmp_path / "o.safetensors")
    report = compress_file(f32, tmp_path / "o.safetensors", keep_other_dtypes=True)
    assert report.entries[0]["kind"] == "verbatim"
    nan = gaussian.clone()
    nan[3, 4] = float("nan")
    path = tmp_path / "nan.safetensors"
    save_file({"w": nan}, str(path))
    with pytest.raises(Nf12Error, match="NaN"):
        compress_file(path, tmp_path / "n.safetensors")
    compress_file(path, tmp_path / "n.safetensors", allow_nan=True)
    decompress_file(tmp_path / "n.safetensors", tmp_path / "nb.safetensors")
    assert (tmp_path / "nb.safetensors").read_bytes() == path.read_bytes()


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(Nf12Error, match="no such file"):
        compress_file(tmp_path / "nope.safetensors", tmp_path / "o.safetensors")
