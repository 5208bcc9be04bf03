"""trl SFT on compressed traces, the generation harness and its length budget."""

import pytest
import torch
from minpath import MinPathError, SFTSettings, generate, sft, verbose_traces
from minpath.finetune import sft_dataset

# the tests here fine-tune in this process: see conftest.frozen_heap
pytestmark = pytest.mark.usefixtures("frozen_heap")

TRACES = verbose_traces(16, seed=0)
PAIRS = [(t.question, t.cot) for t in TRACES]
SETTINGS = SFTSettings(steps=2, batch_size=4, learning_rate=1e-2, logging_steps=1)


def _params(model):
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


def test_sft_trains_on_the_completion_only(micro):
    model, tok = micro
    before = _params(model)
    result = sft(model, tok, PAIRS, SETTINGS)
    assert result.steps == 2
    assert len(result.losses) == 2
    assert not torch.equal(before, _params(model))
    batch = next(iter(result.extra["trainer"].get_train_dataloader()))
    labels, ids = batch["labels"][0], batch["input_ids"][0]
    text = tok.decode(ids[labels != -100])
    assert "<|user|>" not in text  # the question is given, not learned
    assert "Answer:" in text


def test_sft_with_a_lora_adapter_trains_the_adapter_only(micro):
    peft = pytest.importorskip("peft")
    model, tok = micro
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    result = sft(model, tok, PAIRS, SETTINGS, peft_config=config)
    trained = result.extra["trainer"].model
    names = [n for n, p in trained.named_parameters() if p.requires_grad]
    assert names
    assert all("lora_" in n for n in names)
    assert result.steps == 2


def test_generate_counts_tokens_and_the_budget_forces_an_answer(micro):
    model, tok = micro
    prompts = [t.question for t in TRACES[:4]]
    free, seconds = generate(model, tok, prompts, max_new_tokens=6)
    assert seconds > 0
    assert all(g.tokens <= 6 for g in free)
    capped, _ = generate(model, tok, prompts, budgets=[3, 3, 5, 5])
    for g, budget in zip(capped, [3, 3, 5, 5], strict=True):
        if g.forced:
            assert "\nAnswer:" in g.text
            assert budget < g.tokens <= budget + len(tok("\nAnswer:")["input_ids"]) + 8
        else:
            assert g.tokens <= budget
    with pytest.raises(MinPathError, match="4 prompts but 1 budgets"):
        generate(model, tok, prompts, budgets=[3])


def test_greedy_generation_is_deterministic(micro):
    model, tok = micro
    prompts = [t.question for t in TRACES[:3]]
    a, _ = generate(model, tok, prompts, max_new_tokens=5)
    b, _ = generate(model, tok, prompts, max_new_tokens=5)
    assert [g.text for g in a] == [g.text for g in b]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"steps": 0}, "steps=0"), ({"batch_size": 1.5}, "batch_size=1.5"),
     ({"learning_rate": 0}, "learning_rate=0")],
)  # fmt: skip
def test_bad_settings_are_one_line_errors(kwargs, message):
    with pytest.raises(MinPathError, match=message):
        SFTSettings(**kwargs)


def test_empty_training_data_is_an_error():
    with pytest.raises(MinPathError, match="no training pairs"):
        sft_dataset([])
    with pytest.raises(MinPathError, match="pair 1: the question or the CoT is empty"):
        sft_dataset([("1+1=", "Answer: 2"), ("1+2=", " ")])
