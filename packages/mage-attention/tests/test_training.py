import torch
from mage_attention.modeling import ModelSpec, build_model
from mage_attention.task import MASK, RetrievalTask
from mage_attention.training import (
    Phase,
    _Sharpen,
    diffusion_inputs,
    diffusion_loss,
    pretrained,
    train,
)


def test_noisy_blocks_see_earlier_clean_blocks_and_themselves_only():
    seqs = torch.randint(10, 20, (3, 16))  # a prompt of 8, answers of two blocks of 4
    b = diffusion_inputs(seqs, 8, 4, torch.Generator().manual_seed(0))
    m = b["attention_mask"][0, 0]
    assert b["input_ids"].shape == (3, 24)
    assert m.shape == (24, 24)
    noisy_block_2 = 16 + 4  # the noisy copy of answer block 2 (positions 12..15)
    assert b["position_ids"][0, noisy_block_2].item() == 12
    assert m[noisy_block_2, :12].all()
    assert not m[noisy_block_2, 12:16].any()
    assert m[noisy_block_2, 20:24].all()
    assert not m[noisy_block_2, 16:20].any()
    assert not m[:16, 16:].any()  # nothing clean looks at the noisy copy
    noisy = b["input_ids"][:, 16:]
    labels = b["labels"][:, 16:]
    assert ((noisy == MASK) == (labels != -100)).all()  # exactly the masked tokens are scored
    assert (labels[labels != -100] == seqs[:, 8:][labels != -100]).all()
    assert (b["labels"][:, :16] == -100).all()


def test_training_lowers_the_masked_diffusion_loss():
    task = RetrievalTask(prompt_length=32, pairs=8, queries=8, num_keys=10, num_values=4,
                         num_fillers=4)  # fmt: skip
    spec = ModelSpec(hidden_size=32, intermediate_size=64, layers=1, query_heads=2, kv_heads=1,
                     block_size=4, max_positions=128)  # fmt: skip
    model = build_model(spec, task.vocab_size, MASK)
    losses = train(model, task, [Phase(40, 32, 16, 1e-2)], seed=0)
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.3


def test_weighted_loss_is_the_elbo_form():
    task = RetrievalTask(prompt_length=32, pairs=8, queries=8, num_keys=10, num_values=4,
                         num_fillers=4)  # fmt: skip
    spec = ModelSpec(hidden_size=16, intermediate_size=32, layers=1, query_heads=2, kv_heads=1,
                     block_size=4, max_positions=128)  # fmt: skip
    model = build_model(spec, task.vocab_size, MASK)
    batch = diffusion_inputs(task.generate(4, 0).sequences, 32, 4, torch.Generator().manual_seed(1))
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                   attention_mask=batch["attention_mask"]).logits  # fmt: skip
    labels = batch["labels"]
    ce = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), labels, reduction="none", ignore_index=-100
    )
    masked = labels != -100
    plain = ce[masked].mean()
    elbo = (ce.sum(1) * batch["weight"] / 8).mean()  # 8 answer tokens per row
    torch.testing.assert_close(diffusion_loss(model, batch), plain)
    torch.testing.assert_close(diffusion_loss(model, batch, weighted=True), elbo)
    assert (batch["weight"] >= 1).all()
    assert (batch["weight"] <= 10).all()


def test_pretrained_trains_once_and_then_loads(tmp_path):
    task = RetrievalTask(prompt_length=32, pairs=8, queries=8, num_keys=10, num_values=4,
                         num_fillers=4)  # fmt: skip
    spec = ModelSpec(hidden_size=16, intermediate_size=32, layers=1, query_heads=2, kv_heads=1,
                     block_size=4, max_positions=128)  # fmt: skip
    calls = []
    a = pretrained(spec, task, [Phase(2, 32, 2)], 0, tmp_path, progress=calls.append)
    b = pretrained(spec, task, [Phase(2, 32, 2)], 0, tmp_path, progress=calls.append)
    assert len(calls) == 2  # the second call loaded the cached model
    assert not list(tmp_path.glob("mage-attention/.*tmp"))
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)


def test_a_resumed_curriculum_equals_one_call(tmp_path):
    """``pretrained`` trains the last phase on the cached model of the phases before it; that
    must give the weights that training every phase in one call gives."""
    task = RetrievalTask(prompt_length=32, pairs=8, queries=8, num_keys=10, num_values=4,
                         num_fillers=4)  # fmt: skip
    spec = ModelSpec(hidden_size=16, intermediate_size=32, layers=1, query_heads=2, kv_heads=1,
                     block_size=4, max_positions=128)  # fmt: skip
    phases = [Phase(3, 32, 2), Phase(2, 64, 2, 1e-3)]
    one = build_model(spec, task.vocab_size, MASK, 0)
    train(one, task, phases, seed=0)
    calls = []
    resumed = pretrained(spec, task, phases, 0, tmp_path, progress=calls.append)
    assert len(calls) == 5
    assert len(list(tmp_path.glob("mage-attention/bd-*/config.json"))) == 2  # both prefixes
    for p, q in zip(one.parameters(), resumed.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    longer = pretrained(spec, task, [*phases, Phase(1, 64, 2)], 0, tmp_path,
                        progress=calls.append)  # fmt: skip
    assert len(calls) == 6  # only the added phase trained
    assert longer is not None


def _prefix_entropy(model, task, seed=5):
    data = task.generate(8, seed)
    batch = diffusion_inputs(data.sequences, data.prompt.shape[1], 4, torch.Generator())
    prefix = data.prompt.shape[1] // 4 * 4
    sharp = _Sharpen(batch["attention_mask"], prefix, data.sequences.shape[1] - prefix, 1)
    with torch.no_grad():
        loss = diffusion_loss(model, batch, mage_state=sharp)
    return loss, diffusion_loss(model, batch).detach(), float(torch.stack(sharp.entropies).mean())


def test_the_sharpness_term_attends_as_the_model_does_and_lowers_prefix_entropy():
    """The sharpness term's attention is the model's own (same loss), it reads layers >= 1
    only, and a phase weighted by it leaves answer-block queries with a sharper prefix
    attention than the same phase without it."""
    task = RetrievalTask(prompt_length=32, pairs=8, queries=2, num_keys=10, num_values=4,
                         num_fillers=4, in_block=True)  # fmt: skip
    spec = ModelSpec(hidden_size=16, intermediate_size=32, layers=2, query_heads=2, kv_heads=1,
                     block_size=4, max_positions=128)  # fmt: skip
    entropy = {}
    for weight in (0.0, 1.0):
        model = build_model(spec, task.vocab_size, MASK, 0)
        train(model, task, [Phase(30, 32, 8, 1e-2, sharpen=weight)], seed=0)
        with_term, plain, entropy[weight] = _prefix_entropy(model, task)
        torch.testing.assert_close(with_term, plain)
    assert entropy[1.0] < entropy[0.0] - 0.3
