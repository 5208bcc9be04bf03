"""MOSATrainer end to end through trl, on a micro random model (seconds)."""

import math

import pytest
import torch
from mosa_rl import MOSAConfig, MosaError, MOSATrainer
from mosa_rl.trainer import REF_KEY

from paperstack import tasks, tiny


def _length_reward(completions, **_):
    # Dense and varying, so the policy actually moves in two steps.
    return [-float(len(str(c))) for c in completions]


def _config(tmp_path, **kw):
    base = dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        max_steps=2,
        learning_rate=3e-3,
        bf16=False,
        activation_checkpointing=False,
        use_cpu=True,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        mosa_beta=1.0,
        mosa_top_k=4,
        seed=0,
    )
    base.update(kw)
    return MOSAConfig(**base)


@pytest.fixture
def setup():
    tok = tiny.build_tokenizer()
    model = tiny.build_model("micro", tok, seed=0)
    task = tasks.get("countdown")
    data = task.to_dataset(task.generate(16, seed=0), conversational=True)
    return model, tok, data


def test_mosa_trainer_runs_end_to_end_through_trl(tmp_path, setup):
    model, tok, data = setup
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = MOSATrainer(
        model, _length_reward, _config(tmp_path), train_dataset=data, processing_class=tok
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "mosa/kl" in h]
    assert len(logs) == 2
    # step 1: the policy is the base, so the profiles agree; the base stays frozen after
    assert logs[0]["mosa/kl"] == pytest.approx(0.0, abs=1e-6)
    assert logs[0]["mosa/top1_policy"] == pytest.approx(logs[0]["mosa/top1_ref"], abs=1e-5)
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    ref = trainer._mosa_ref
    assert ref is not None
    assert ref is not trainer.model
    ref_params = dict(ref.named_parameters())
    assert all(torch.equal(before[n], ref_params[n]) for n in before)


def test_mosa_term_enters_the_loss(tmp_path, setup):
    """Same inputs, same weights: the loss differs from trl's by exactly mosa_beta * KL."""
    model, tok, data = setup
    trainer = MOSATrainer(
        model,
        _length_reward,
        _config(tmp_path, mosa_beta=2.0),
        train_dataset=data,
        processing_class=tok,
    )
    rows = [data[i] for i in (0, 1) for _ in range(4)]  # trl's sampler repeats each prompt
    batch = trainer._generate_and_score_completions(rows)
    assert batch[REF_KEY].shape == (8, 5)
    # move the policy away from the base so the KL is non-zero
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.mul_(1.5)
    trainer.model.eval()  # eval mode: no gradient-accumulation scaling of either term
    with_mosa = trainer._compute_loss(trainer.model, batch)
    kl = trainer._metrics["eval"]["mosa/kl"][-1]
    trainer.mosa_beta = 0.0
    plain = trainer._compute_loss(trainer.model, batch)
    assert kl > 0
    assert with_mosa.item() == pytest.approx(plain.item() + 2.0 * kl, rel=1e-4, abs=1e-6)


def test_token_kl_and_mosa_together_share_trls_reference(tmp_path, setup):
    model, tok, data = setup
    path = tmp_path / "base"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    model, tok = tiny.load(path)
    trainer = MOSATrainer(
        model,
        _length_reward,
        _config(tmp_path, beta=0.04, max_steps=1),
        train_dataset=data,
        processing_class=tok,
    )
    assert trainer._mosa_ref is trainer.ref_model
    trainer.train()
    logs = trainer.state.log_history[0]
    assert "kl" in logs
    assert "mosa/kl" in logs


def test_peft_adapter_disabled_is_the_reference(tmp_path, setup):
    peft = pytest.importorskip("peft")
    model, tok, data = setup
    lora = peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
    )
    trainer = MOSATrainer(
        model,
        _length_reward,
        _config(tmp_path, max_steps=1),
        train_dataset=data,
        processing_class=tok,
        peft_config=lora,
    )
    assert trainer._mosa_ref is None  # no second copy of the model
    trainer.train()
    assert "mosa/kl" in trainer.state.log_history[0]


def test_plain_grpo_when_mosa_beta_is_zero(tmp_path, setup):
    model, tok, data = setup
    trainer = MOSATrainer(
        model,
        _length_reward,
        _config(tmp_path, mosa_beta=0.0, max_steps=1),
        train_dataset=data,
        processing_class=tok,
    )
    trainer.train()
    assert "mosa/kl" not in trainer.state.log_history[0]


def test_rejects_k_larger_than_the_vocabulary(tmp_path, setup):
    model, tok, data = setup
    with pytest.raises(MosaError, match="top_k=500: larger than the vocabulary"):
        MOSATrainer(
            model,
            _length_reward,
            _config(tmp_path, mosa_top_k=500),
            train_dataset=data,
            processing_class=tok,
        )


def test_rejects_a_reference_model_with_another_vocabulary(tmp_path, setup):
    from transformers import LlamaConfig, LlamaForCausalLM

    model, tok, data = setup
    other = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=50,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
        )
    )
    with pytest.raises(
        MosaError, match="ref_model: vocabulary of 50 tokens, but the policy has 103"
    ):
        MOSATrainer(
            model,
            _length_reward,
            _config(tmp_path),
            train_dataset=data,
            processing_class=tok,
            ref_model=other,
        )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("mosa_beta", -1.0, "mosa_beta"),
        ("mosa_kl", "both", "mosa_kl"),
        ("mosa_top_k", 0, "mosa_top_k"),
    ],
)
def test_config_rejects_bad_values(tmp_path, field, value, message):
    with pytest.raises(MosaError, match=message):
        _config(tmp_path, **{field: value})


def test_reference_sums_match_the_models_own_logits(tmp_path, setup):
    """The rollout-time base profile is the profile of the model's logits on the completion
    positions (checks the one-token shift between hidden states and completion tokens)."""
    from mosa_rl.loss import profile_sums

    model, tok, data = setup
    trainer = MOSATrainer(
        model, _length_reward, _config(tmp_path), train_dataset=data, processing_class=tok
    )
    rows = [data[i] for i in (0, 1) for _ in range(4)]
    batch = trainer._generate_and_score_completions(rows)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    width = batch["completion_ids"].size(1)
    with torch.no_grad():
        logits = trainer.model(input_ids=ids, attention_mask=attention).logits[:, -width - 1 : -1]
    want = profile_sums(logits, batch["completion_mask"], 4, logits=True)
    assert torch.allclose(batch[REF_KEY], want, atol=1e-5)


def test_bf16_body_with_fp32_head_trains(tmp_path, setup):
    """trl's cast_lm_head_to_fp32 keeps the head in fp32 beside a bf16 body: the profile is
    computed in fp32 from bf16 hidden states (0.1 crashed here: bf16 met the fp32 weight)."""
    model, tok, data = setup
    model = model.to(torch.bfloat16)
    trainer = MOSATrainer(
        model,
        _length_reward,
        _config(tmp_path, bf16=True, cast_lm_head_to_fp32=True),
        train_dataset=data,
        processing_class=tok,
    )
    assert trainer.model.lm_head.weight.dtype == torch.float32
    assert trainer.model.model.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16
    trainer.train()
    logs = [h for h in trainer.state.log_history if "mosa/kl" in h]
    assert len(logs) == 2
    assert all(math.isfinite(h["mosa/kl"]) for h in logs)
    assert logs[0]["mosa/kl"] == pytest.approx(0.0, abs=1e-5)


def _with_sharding(monkeypatch, *, fsdp: bool = False, zero_stage: int | None = None):
    """Make the Trainer's accelerator report FSDP or DeepSpeed the way accelerate does."""
    from transformers import Trainer

    original = Trainer.create_accelerator_and_postprocess

    def patched(self):
        original(self)
        if fsdp:
            self.is_fsdp_enabled = True
        if zero_stage is not None:
            plugin = type("Plugin", (), {"zero_stage": zero_stage})()
            state = type(self.accelerator.state)
            monkeypatch.setattr(state, "deepspeed_plugin", property(lambda _self: plugin))

    monkeypatch.setattr(Trainer, "create_accelerator_and_postprocess", patched)


@pytest.mark.parametrize(
    ("kind", "message"),
    [("fsdp", "FSDP: not supported with mosa_beta > 0"), ("zero3", "DeepSpeed ZeRO-3")],
)
def test_partitioned_parameters_are_refused_in_one_line(
    tmp_path, setup, monkeypatch, kind, message
):
    model, tok, data = setup
    _with_sharding(monkeypatch, fsdp=kind == "fsdp", zero_stage=3 if kind == "zero3" else None)
    with pytest.raises(MosaError, match=message) as exc:
        MOSATrainer(model, _length_reward, _config(tmp_path), train_dataset=data,
                    processing_class=tok)  # fmt: skip
    assert "\n" not in str(exc.value)


def test_check_sharding_allows_zero2_and_ddp():
    from mosa_rl.trainer import check_sharding

    check_sharding(None, False)
    check_sharding(type("Plugin", (), {"zero_stage": 2})(), False)
    with pytest.raises(MosaError, match="ZeRO-3"):
        check_sharding(type("Plugin", (), {"zero_stage": 3})(), False)


def test_plain_grpo_is_not_refused_under_fsdp(tmp_path, setup, monkeypatch):
    model, tok, data = setup
    _with_sharding(monkeypatch, fsdp=True)
    trainer = MOSATrainer(model, _length_reward, _config(tmp_path, mosa_beta=0.0),
                          train_dataset=data, processing_class=tok)  # fmt: skip
    assert trainer.mosa_beta == 0.0


@pytest.mark.gpu
def test_bf16_with_fp32_head_on_cuda(tmp_path, setup):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    model, tok, data = setup
    trainer = MOSATrainer(
        model.to(torch.bfloat16),
        _length_reward,
        _config(tmp_path, bf16=True, cast_lm_head_to_fp32=True, use_cpu=False),
        train_dataset=data,
        processing_class=tok,
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "mosa/kl" in h]
    assert len(logs) == 2
    assert all(math.isfinite(h["mosa/kl"]) for h in logs)
