"""OPCTTrainer end to end on a tiny model, the SFT baseline, and the trainer's bad input."""

import pytest
import torch
from opct import OPCTConfig, OPCTError, OPCTTrainer, Pair, TrainSettings, train_bct, train_opct
from opct.harness import bct_targets, pairs_dataset
from opct.pairs import mixed_pairs
from opct.world import AlignmentWorld

from paperstack import tiny

WORLD = AlignmentWorld()
SETTINGS = TrainSettings(steps=2, batch_size=4, max_completion_length=12, logging_steps=1)


def _args(**kw):
    return OPCTConfig(output_dir="unused", use_cpu=True, report_to="none",
                      max_completion_length=kw.pop("max_completion_length", 8), **kw)  # fmt: skip


def _params(model):
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


def test_opct_trains_end_to_end_on_policy_and_leaves_the_teacher_frozen(micro):
    model, tok = micro
    before = _params(model)
    trainer = OPCTTrainer(
        model,
        args=OPCTConfig(
            output_dir="unused", max_steps=2, per_device_train_batch_size=4,
            max_completion_length=12, learning_rate=1e-2, use_cpu=True, report_to="none",
            save_strategy="no", logging_steps=1, disable_tqdm=True,
        ),
        train_dataset=pairs_dataset(mixed_pairs(WORLD, 16, seed=0)),
        processing_class=tok,
    )  # fmt: skip
    teacher_before = _params(trainer.teacher_model)
    trainer.train()
    assert trainer.state.global_step == 2
    assert not torch.equal(before, _params(model)), "the student did not move"
    assert torch.equal(teacher_before, _params(trainer.teacher_model)), "the teacher moved"
    logged = [h for h in trainer.state.log_history if "opct/divergence" in h]
    assert logged
    assert all(h["opct/divergence"] >= 0 for h in logged)


def test_teacher_sees_the_clean_prompt_and_the_students_response(micro):
    model, tok = micro
    trainer = OPCTTrainer(
        model,
        args=OPCTConfig(output_dir="unused", max_completion_length=6, use_cpu=True,
                        report_to="none", per_device_train_batch_size=2),
        train_dataset=pairs_dataset([Pair("I think it's Oslo. Where?", "Where?")] * 2),
        processing_class=tok,
    )  # fmt: skip
    inputs = [{"prompt": [{"role": "user", "content": "I think it's Oslo. Where?"}],
               "teacher_prompt": [{"role": "user", "content": "Where?"}]}] * 2  # fmt: skip
    batch = trainer._generate_and_score_completions(inputs)
    clean = tok.decode(batch["teacher_prompt_ids"][0], skip_special_tokens=False)
    wrapped = tok.decode(batch["prompt_ids"][0], skip_special_tokens=False)
    assert "Oslo" in wrapped
    assert "Oslo" not in clean
    assert "Where?" in clean
    loss = trainer.compute_loss(model, batch)
    assert torch.isfinite(loss)
    assert loss.item() >= 0


def test_harness_runs_both_methods_for_the_same_steps(micro_path):
    pairs = mixed_pairs(WORLD, 16, seed=1)
    model, tok = tiny.load(micro_path)
    opct = train_opct(model, tok, pairs, SETTINGS)
    model, tok = tiny.load(micro_path)
    targets = bct_targets(model, tok, pairs, max_new_tokens=12, seed=1)
    assert len(targets) == len(pairs)
    sft = train_bct(model, tok, pairs, SETTINGS, targets=targets)
    assert opct.steps == sft.steps == 2
    assert opct.losses
    assert sft.losses


def test_empty_prompt_in_a_dataset_is_one_error(micro):
    import datasets

    model, tok = micro
    data = datasets.Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": "  "}]],
         "teacher_prompt": [[{"role": "user", "content": "What?"}]]}
    )  # fmt: skip
    with pytest.raises(OPCTError, match="train_dataset row 0: 'prompt' is empty"):
        OPCTTrainer(model, args=_args(),
                    train_dataset=data, processing_class=tok)  # fmt: skip
    with pytest.raises(OPCTError, match="pair 0: field 'clean' is empty"):
        pairs_dataset([Pair("What?", "")])


def test_tokenizer_mismatch_between_student_and_teacher_is_one_error(micro):
    model, tok = micro
    other = tiny.build_tokenizer()
    other.chat_template = "{{ messages[0]['content'] }}"
    with pytest.raises(OPCTError, match="another chat template"):
        OPCTTrainer(model, args=_args(),
                    processing_class=tok, teacher_processing_class=other)  # fmt: skip
    bigger = tiny.build_model("micro", tok, seed=0)
    bigger.resize_token_embeddings(bigger.config.vocab_size + 8)
    with pytest.raises(OPCTError, match="vocabulary of"):
        OPCTTrainer(model, teacher_model=bigger, processing_class=tok,
                    args=_args())  # fmt: skip


def test_responses_longer_than_the_context_are_one_error(micro):
    model, tok = micro
    data = pairs_dataset(mixed_pairs(WORLD, 4, seed=0))
    args = _args(max_completion_length=600)
    with pytest.raises(OPCTError, match=r"max_completion_length=600: .* context of 512"):
        OPCTTrainer(model, args=args, train_dataset=data, processing_class=tok)
    args = _args(max_completion_length=500)
    long = pairs_dataset([Pair("x" * 40, "y")])
    with pytest.raises(OPCTError, match=r"row 0: 'prompt' has .* tokens"):
        OPCTTrainer(model, args=args, train_dataset=long, processing_class=tok)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"opct_divergence": "kl"}, "opct_divergence='kl'"),
        ({"opct_top_k": 0}, "opct_top_k=0"),
        ({"beta": 0.5}, "beta=0.5"),
        ({"opct_jsd_mix": 1.0}, "opct_jsd_mix=1.0"),
    ],
)
def test_bad_config_values_are_one_line_errors(kwargs, message):
    with pytest.raises(OPCTError, match=message):
        OPCTConfig(output_dir="x", use_cpu=True, report_to="none", **kwargs)
