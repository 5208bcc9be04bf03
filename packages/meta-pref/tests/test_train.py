"""`meta-pref train` on a user's model: the zoo's architectures (chat templates, GPT-2's missing
pad token and template), truncation to the model's context, and SmolLM2 from the CLI (slow).
The conformance suite runs the command on every zoo checkpoint with the slow tests."""

import json
from pathlib import Path

import pytest
from meta_pref.cli import main
from meta_pref.data import PreferencePair

from paperstack.testing import zoo

PAIRS = Path(__file__).parent / "data" / "pairs.jsonl"
SMOKE = ["--pairs", str(PAIRS), "--target", "near", "--outer-steps", "1", "--support", "2",
         "--query", "2", "--adapt-epochs", "1", "--batch-size", "2",
         "--max-length", "64"]  # fmt: skip


def _train(tmp_path, name, *extra):
    out = tmp_path / name
    code = main(["train", "--model", str(zoo.checkpoint(name)), "--out", str(out), *SMOKE, *extra])
    assert code == 0
    return out, json.loads((out / "train.json").read_text())


@pytest.mark.parametrize(
    ("name", "objective"), [("llama", "reward"), ("gpt2", "dpo"), ("qwen3", "reward")]
)
def test_train_runs_on_zoo_checkpoints(tmp_path, name, objective):
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    out, record = _train(tmp_path, name, "--objective", objective)
    assert record["sources"] == ["s1", "s2"]
    assert record["target_held_out"] == 4
    assert record["max_length"] == 64
    assert len(record["init_losses"]) == 1
    assert record["adapt"]["steps"] >= 1
    for key in ("held_out_accuracy_before", "held_out_accuracy_after"):
        assert 0.0 <= record[key] <= 1.0
    loader = AutoModelForSequenceClassification if objective == "reward" else AutoModelForCausalLM
    model = loader.from_pretrained(out / "model")
    assert model.config.pad_token_id is not None


def test_the_joint_baseline_takes_as_many_passes(tmp_path):
    _, meta = _train(tmp_path, "llama")
    _, joint = _train(tmp_path / "j", "llama", "--init", "joint")
    assert joint["init_passes"] == meta["init_passes"] == 1 * 3 * (3 + 1)
    assert len(joint["init_losses"]) == joint["init_passes"]


def _long_pair() -> PreferencePair:
    return PreferencePair("near", "word " * 200, "yes " * 100, "no " * 100)


@pytest.mark.parametrize("name", ["qwen2", "gpt2", "mistral"])
def test_encodings_use_the_chat_template_and_fit_the_context(name):
    from meta_pref import models as m
    from meta_pref.adapt import dpo_texts
    from meta_pref.hf import load_tokenizer

    tok = load_tokenizer(str(zoo.checkpoint(name)), max_length=48)
    assert tok.model_max_length == 48
    assert tok.pad_token_id is not None
    short = PreferencePair("near", "fb", "c", "db")
    text = m.prompt_text(tok, short.prompt)
    marker = {"qwen2": "<|im_start|>assistant", "gpt2": "Assistant:", "mistral": "[/INST]"}[name]
    assert marker in text
    assert "fb" in text
    (row,) = m.encode_rewards(tok, [short])
    assert row["chosen_ids"][-1] == tok.eos_token_id
    assert row["chosen_ids"][: len(m.prompt_ids(tok, "fb"))] == m.prompt_ids(tok, "fb")
    long = _long_pair()
    (rm_row,) = m.encode_rewards(tok, [long])
    (dpo_row,) = m.encode_policy(tok, [long])
    assert len(rm_row["chosen_ids"]) <= 48
    assert len(rm_row["rejected_ids"]) <= 48
    for key in ("chosen_ids", "rejected_ids"):
        assert len(dpo_row["prompt_ids"]) + len(dpo_row[key]) <= 48
    # the prompt keeps its end (the generation prompt), the response its start
    full = m.prompt_ids(tok, long.prompt)
    assert dpo_row["prompt_ids"] == full[len(full) - len(dpo_row["prompt_ids"]) :]
    assert tok.decode(dpo_row["chosen_ids"]).startswith("yes")
    (texts,) = dpo_texts(tok, [long])
    assert len(tok(texts["prompt"] + texts["chosen"], add_special_tokens=False)["input_ids"]) <= 49


def test_the_toy_keeps_its_own_layout(tok):
    from meta_pref import models as m

    (row,) = m.encode_policy(tok, [PreferencePair("near", "fb", "c", "db")])
    assert row["prompt_ids"] == [
        tok.bos_token_id,
        *tok("fb>", add_special_tokens=False)["input_ids"],
    ]
    assert m.max_length(tok) is None


def _refused(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_refusals_are_one_line(tmp_path, capsys):
    llama = str(zoo.checkpoint("llama"))
    no_tok = str(zoo.checkpoint("no-tokenizer"))
    assert "tokenizer" in _refused(capsys, ["train", "--model", no_tok, "--out",
                                            str(tmp_path / "a"), *SMOKE])  # fmt: skip
    assert "cannot also be a source" in _refused(
        capsys, ["train", "--model", llama, "--out", str(tmp_path / "b"), *SMOKE,
                 "--sources", "s1,near"])  # fmt: skip
    assert "fewer than the" in _refused(
        capsys, ["train", "--model", llama, "--out", str(tmp_path / "c"), *SMOKE,
                 "--support", "20"])  # fmt: skip
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_train_on_smollm2_from_the_cli(tmp_path, smollm2):
    import subprocess
    import sys

    out = tmp_path / "smol"
    argv = ["train", "--model", smollm2, "--out", str(out), *SMOKE, "--objective", "dpo"]
    proc = subprocess.run([sys.executable, "-m", "meta_pref.cli", *argv], capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((out / "train.json").read_text())
    assert record["max_length"] == 64
    assert record["adapt"]["steps"] >= 1
    assert (out / "model" / "config.json").is_file()
