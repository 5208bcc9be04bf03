import torch
from saga_attention.modeling import SagaConfig, SagaForCausalLM, cache_kwargs, enable_saga_attention
from saga_attention.recall import RecallTask
from saga_attention.training import ModelSpec, TrainSpec, build_model, evaluate_decode, train
from transformers import DynamicCache

TASK = RecallTask(pairs=4, queries=3, num_keys=6, num_values=4, context=30, num_fillers=5)


def _model():
    config = SagaConfig(
        vocab_size=TASK.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=8, num_key_heads=2, num_key_value_heads=4,
        max_position_embeddings=128,
    )  # fmt: skip
    return SagaForCausalLM(config).eval()


def test_decode_evaluation_equals_prefill_then_token_by_token_sparse_decoding():
    """evaluate_decode scores the queries in one call with sparse prefill on top of a dense
    prefill's cache; that must be what generating them one token at a time computes."""
    model = _model()
    result = evaluate_decode(model, TASK, 3, seed=5, modes=("atop",), top_n=6)["atop"]
    data = TASK.generate(3, seed=5)
    prompt = TASK.prompt_length
    correct = []
    with torch.no_grad():
        for ids in data.input_ids:
            ids = ids.unsqueeze(0)
            cache = DynamicCache(config=model.config)
            enable_saga_attention(model, "dense")
            model(ids[:, :prompt], **cache_kwargs(model, cache), use_cache=True)
            enable_saga_attention(model, "atop", 6)
            for t in range(prompt, ids.shape[1] - 1):  # feed q1, a1, q2, ... one at a time
                out = model(ids[:, t : t + 1], **cache_kwargs(model, cache), use_cache=True)
                if (t - prompt) % 2 == 0:  # a query: its logits predict the answer
                    correct.append(bool(out.logits[0, -1].argmax() == ids[0, t + 1]))
    enable_saga_attention(model, "dense")
    assert result.correct.tolist() == correct


def test_a_curriculum_phase_trains_at_its_own_context():
    model = build_model(TASK, ModelSpec(hidden_size=16, intermediate_size=32, layers=1,
                                        query_heads=4, key_heads=2, value_heads=2))  # fmt: skip
    before = [p.detach().clone() for p in model.parameters()]
    losses = train(model, TASK, TrainSpec(steps=2, batch_size=2, context=50))
    assert losses
    assert all(loss > 0 for loss in losses)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
