import json

import pytest
import torch
from mage_attention import MageError
from mage_attention.attention import Budget
from mage_attention.baselines import Exact, make_policy
from mage_attention.decoding import SparseAttentionState, generate
from mage_attention.modeling import (
    BlockCache,
    ModelSpec,
    block_causal_mask,
    build_model,
    forward_kwargs,
    load_model,
)
from mage_attention.task import MASK

SPEC = ModelSpec(hidden_size=32, intermediate_size=64, layers=2, query_heads=4, kv_heads=2,
                 block_size=4, max_positions=512)  # fmt: skip


@pytest.fixture(scope="module")
def model():
    return build_model(SPEC, vocab_size=40, mask_token_id=MASK, seed=0).eval()


def test_block_causal_mask_is_bidirectional_inside_blocks_and_causal_across():
    m = block_causal_mask(8, 4)[0, 0]
    assert m[1, 3]
    assert m[3, 0]
    assert m[5, 2]
    assert m[4, 7]
    assert not m[3, 4]
    assert not m[0, 5]


def test_block_sizes_that_do_not_divide_the_sequence_are_one_clear_error():
    with pytest.raises(MageError, match="block size 4 does not divide the sequence length 10"):
        block_causal_mask(10, 4)


@torch.no_grad()
def test_denoising_over_the_frozen_cache_equals_a_full_block_causal_forward(model):
    """The cached path (prefill, frozen steps, commit) computes what one forward pass of the
    whole sequence under the block-causal mask computes."""
    prompt = torch.randint(4, 40, (2, 8))
    block = torch.randint(4, 40, (2, 4))
    block[:, 1] = MASK
    cache = BlockCache()
    kw = forward_kwargs(model, cache)
    model(input_ids=prompt, attention_mask=block_causal_mask(8, 4), use_cache=True, **kw)
    state = SparseAttentionState(cache, Exact(Budget(4, 0, 0)))
    cache.frozen, state.active = True, True
    pos = torch.arange(8, 12).expand(2, 4)
    step = model(input_ids=block, position_ids=pos, mage_state=state, use_cache=True, **kw).logits
    assert cache.get_seq_length() == 8  # the block being denoised is not stored
    full = torch.cat([prompt, block], 1)
    ref = model(input_ids=full, attention_mask=block_causal_mask(12, 4), use_cache=False).logits
    torch.testing.assert_close(step, ref[:, 8:], atol=1e-4, rtol=1e-4)
    cache.frozen, state.active = False, False
    model(input_ids=block, position_ids=pos, use_cache=True, **kw)
    assert cache.get_seq_length() == 12  # committed: appended


def test_generate_decodes_block_by_block_without_masks_left(model):
    prompt = torch.randint(4, 40, (3, 16))
    res = generate(model, prompt, 8, make_policy("exact", Budget(8, 2, 2)), probe=True)
    assert res.tokens.shape == (3, 8)
    assert not (res.tokens == MASK).any()
    assert res.probe is not None
    assert set(res.probe.overlap) == {2, 3, 4}


def test_mage_with_the_whole_prefix_decodes_what_exact_decodes(model):
    prompt = torch.randint(4, 40, (2, 16))
    exact = generate(model, prompt, 8, make_policy("exact", Budget(16, 2, 2)))
    mage = generate(model, prompt, 8, make_policy("mage", Budget(16, 2, 2)), probe=True)
    # the second block's prefix is 20 tokens, k = 16 of them: compare the first block only
    assert torch.equal(exact.tokens[:, :4], mage.tokens[:, :4])
    assert mage.probe is not None
    assert mage.probe.mean_recall(range(2, 5)) > 0.5


def test_dense_layers_attend_exactly_for_every_policy_and_leave_the_probe_means(model):
    """``Budget.dense_layers``: layer 0 is never handed to the policy (a policy that fails when
    asked proves it), and the probe's means describe layer 1 only, its per-layer record both."""
    from mage_attention.attention import Policy

    class OnlyLayer1(Policy):
        name = "only-layer-1"

        def select(self, layer, step, q, k_pre, v_pre):
            assert layer == 1, "a dense layer reached the policy"
            return make_policy("random", self.budget, seed=3).select(layer, step, q, k_pre, v_pre)

    prompt = torch.randint(4, 40, (2, 32))
    budget = Budget(8, 2, 2, dense_layers=1)
    res = generate(model, prompt, 4, OnlyLayer1(budget), probe=True)
    assert res.probe is not None
    assert set(res.probe.layer_means("oracle")) == {0, 1}
    assert set(res.probe.layer_means("recall")) == {1}
    assert res.probe.mean_oracle() == pytest.approx(res.probe.layer_means("oracle")[1])
    assert res.probe.mean_overlap() == pytest.approx(res.probe.layer_means("overlap")[1])
    # every layer dense: any policy decodes what exact attention decodes
    dense = Budget(8, 2, 2, dense_layers=SPEC.layers)
    exact = generate(model, prompt, 8, make_policy("exact", Budget(8, 2, 2)))
    for name in ("mage", "quest", "random"):
        assert torch.equal(generate(model, prompt, 8, make_policy(name, dense)).tokens,
                           exact.tokens)  # fmt: skip
    with pytest.raises(MageError, match="dense_layers"):
        Budget(8, 2, 2, dense_layers=-1)


@torch.no_grad()
def reference_decode(model, prompt, answer_length, threshold=None):
    """Block diffusion decoding without a cache: every step runs the whole sequence so far
    under the block-causal mask (SDAR's generator with the prompt tail in the first block)."""
    from mage_attention.decoding import _commit, _commit_counts

    block, mask_id = model.config.block_size, model.config.mask_token_id
    shift = bool(getattr(model.config, "token_shift", False))
    length = prompt.shape[1]
    total = -(-(length + answer_length) // block) * block
    x = torch.full((prompt.shape[0], total), mask_id)
    x[:, :length] = prompt
    for start in range(length // block * block, total, block):
        end = start + block
        masked_count = int((x[0, start:end] == mask_id).sum())
        for count in _commit_counts(masked_count, block):
            masked = x[:, start:end] == mask_id
            if not masked.any():
                break
            logits = model(input_ids=x[:, :end], attention_mask=block_causal_mask(end, block),
                           use_cache=False).logits.float()  # fmt: skip
            logits = logits[:, start - 1 : end - 1] if shift else logits[:, start:end]
            logits[..., mask_id] = float("-inf")
            conf, pred = torch.softmax(logits, -1).max(-1)
            conf = conf.masked_fill(~masked, float("-inf"))
            pick = _commit(conf, masked, count, threshold)
            x[:, start:end] = torch.where(pick, pred, x[:, start:end])
    return x[:, length : length + answer_length]


@pytest.mark.parametrize(("length", "answer"), [(10, 6), (16, 8), (3, 5)])
@pytest.mark.parametrize("threshold", [None, 0.05])
def test_partial_block_prompts_decode_as_the_uncached_reference(model, length, answer, threshold):
    """Prompts and answers of any length (SDAR's generator): the prompt's whole blocks are
    prefilled, its tail opens the first block; the cached decoder equals the uncached one."""
    prompt = torch.randint(4, 40, (2, length))
    got = generate(model, prompt, answer, make_policy("exact", Budget(2, 0, 0)),
                   threshold=threshold).tokens  # fmt: skip
    assert got.shape == (2, answer)
    assert not (got == MASK).any()
    assert torch.equal(got, reference_decode(model, prompt, answer, threshold))


def test_threshold_commitment_follows_sdar_dynamic_rule():
    from mage_attention.decoding import _commit

    inf = float("-inf")
    conf = torch.tensor([[0.90, 0.50, 0.95, inf, 0.30]])
    masked = conf > inf
    # two above 0.85 and the step's count is 1: both commit
    assert _commit(conf, masked, 1, 0.85).tolist() == [[True, False, True, False, False]]
    # the step's count is 3, only two above: the 3 most confident commit instead
    assert _commit(conf, masked, 3, 0.85).tolist() == [[True, True, True, False, False]]
    # fixed count: the top 2, never an unmasked position
    assert _commit(conf, masked, 2, None).tolist() == [[True, False, True, False, False]]


def test_a_low_threshold_finishes_a_block_in_one_step(model):
    prompt = torch.randint(4, 40, (2, 16))
    res = generate(model, prompt, 8, make_policy("exact", Budget(8, 2, 2)), probe=True,
                   threshold=0.0)  # fmt: skip
    assert res.probe is not None
    assert not res.probe.overlap  # no step 2 ever ran
    fixed = generate(model, prompt, 8, make_policy("exact", Budget(8, 2, 2)), probe=True)
    assert fixed.probe is not None
    assert set(fixed.probe.overlap) == {2, 3, 4}


def test_k_larger_than_the_prompt_is_refused_before_decoding(model):
    with pytest.raises(MageError, match=r"k=32 is larger than the prefix \(16 tokens\)"):
        generate(model, torch.randint(4, 40, (1, 16)), 4, make_policy("mage", Budget(32)))


def test_save_pretrained_from_pretrained_round_trip(model, tmp_path):
    model.save_pretrained(tmp_path)
    again = load_model(tmp_path)
    assert again.config.mask_token_id == MASK
    assert again.config.block_size == 4
    assert again.config._attn_implementation == "mage"
    prompt = torch.randint(4, 40, (2, 8))
    a = generate(model, prompt, 4, make_policy("mage", Budget(4, 1, 1))).tokens
    b = generate(again, prompt, 4, make_policy("mage", Budget(4, 1, 1))).tokens
    assert torch.equal(a, b)


def test_a_checkpoint_without_a_mask_token_is_one_clear_error(model, tmp_path):
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["mask_token_id"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(MageError, match="no mask_token_id: not a block-diffusion checkpoint"):
        load_model(tmp_path)
    assert load_model(tmp_path, mask_token_id=MASK).config.mask_token_id == MASK


def test_a_truncated_checkpoint_names_the_file(model, tmp_path):
    from paperstack.errors import PaperstackError

    model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(PaperstackError, match=r"model\.safetensors"):
        load_model(tmp_path)
