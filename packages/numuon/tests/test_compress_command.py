"""`numuon compress`: loss before/after SVD compression of a saved model, and its refusals."""

import shutil

import pytest
from numuon.cli import main
from test_demo import _one_line_error

from paperstack.records import load_results


def test_compress_reports_loss_before_and_after_for_a_saved_model(tmp_path, saved_model):
    model, text = saved_model
    out = tmp_path / "out"
    args = ["compress", str(model), "--text", str(text), "--out", str(out)]
    assert main([*args, "--seq-len", "32", "--reductions", "0.5"]) == 0
    results = load_results(out)
    whitened = results.row("whitened", "loss", "reduce-50%")
    assert whitened.value > 0
    assert whitened.items is not None  # per-sequence losses: paired with the original's
    assert set(whitened.items) == set(results.row("original", "loss").items or {})
    assert results.row("original", "stable_rank").value > 1


def test_compress_rejects_a_missing_model(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("abc\n" * 2000)
    err = _one_line_error(
        capsys, ["compress", str(tmp_path / "nope"), "--text", str(text), "--out", str(tmp_path)]
    )
    assert "nope" in err


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A micro Llama saved with its tokenizer, and a corpus for it."""
    from numuon.toy import ModelShape, build_llama

    from paperstack.tiny import build_tokenizer

    root = tmp_path_factory.mktemp("saved")
    tok = build_tokenizer()
    build_llama(ModelShape(32, 64, 1, 2), tok, 32, seed=0).save_pretrained(root / "m")
    tok.save_pretrained(root / "m")
    text = root / "corpus.txt"
    text.write_text("12+34=46\nWhat is the pet of Luku? frog\n" * 200)
    return root / "m", text


def test_compress_rejects_a_truncated_checkpoint(tmp_path, capsys, saved_model):
    model, text = saved_model
    broken = tmp_path / "broken"
    shutil.copytree(model, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    out = tmp_path / "out"
    err = _one_line_error(capsys, ["compress", str(broken), "--text", str(text), "--out", str(out)])
    assert "model.safetensors" in err
    assert "truncated" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--seq-len", "0"], "--seq-len 0: must be >= 1"),
        (["--reductions", "0.5,1.2"], "1.2 is not a fraction"),
        (["--reductions", "a,b"], "--reductions a,b"),
    ],
)
def test_compress_bad_numbers_are_one_line_errors(tmp_path, capsys, saved_model, extra, needle):
    model, text = saved_model
    args = ["compress", str(model), "--text", str(text), "--out", str(tmp_path / "o"), *extra]
    assert needle in _one_line_error(capsys, args)


def test_compress_text_that_is_a_directory_is_a_one_line_error(tmp_path, capsys, saved_model):
    model, _ = saved_model
    err = _one_line_error(
        capsys, ["compress", str(model), "--text", str(tmp_path), "--out", str(tmp_path / "o")]
    )
    assert "is a directory" in err
