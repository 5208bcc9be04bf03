import copy

import numpy as np
import pytest
import torch
from progress_advantage import ChatModelScorer, LogRatioScorer, Trajectory, progress_advantage
from progress_advantage.baselines import confidence_step_scores, confidence_trajectory_scores
from progress_advantage.errors import ProgressAdvantageError

from paperstack.llm import TransformersChat


def _trajs():
    return [
        Trajectory.from_lines("3+4*2=", "4*2=8\n3+8=11\nAnswer: 11", id="a"),
        Trajectory.from_lines("1+1=", "1+1=2\nAnswer: 2", id="b"),
        Trajectory.from_turns(
            [
                {"role": "user", "content": "start"},
                {"role": "assistant", "content": "look"},
                {"role": "user", "content": "a door"},
                {"role": "assistant", "content": "open it"},
            ],
            id="c",
        ),
    ]


def _token_logps(model, tok, traj):
    """Reference implementation: one unbatched forward, log-softmax everywhere."""
    text = tok.apply_chat_template([dict(m) for m in traj.messages], tokenize=False)
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = torch.tensor([enc["input_ids"]])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].double(), -1)
    token_at = {start: i for i, (start, _) in enumerate(enc["offset_mapping"])}
    return logp.gather(-1, ids[0, 1:, None]).squeeze(-1).numpy(), text, token_at


def test_log_ratios_equal_an_unbatched_reference_implementation(micro):
    policy, reference, tok = micro
    trajs = _trajs()
    scored = LogRatioScorer(policy, reference, tok, batch_size=2).score(trajs)
    for traj, ts in zip(trajs, scored, strict=True):
        lp, text, token_at = _token_logps(policy, tok, traj)
        lr, _, _ = _token_logps(reference, tok, traj)
        # Char-level tokenizer: the step tokens are exactly the step characters.
        assert ts.step.size == sum(len(s) for s in traj.step_texts())
        # The scored tokens are the last ones of each assistant message (before its EOS).
        offsets, cursor = [], 0
        for m in traj.messages:
            offsets.append(text.find(m["content"], cursor))
            cursor = offsets[-1] + len(m["content"])
        want = []
        for s in traj.steps:
            at = offsets[s.message]
            # Token i is predicted at position i - 1.
            want += [token_at[c] - 1 for c in range(at + s.start, at + s.end)]
        np.testing.assert_allclose(ts.log_ratio, (lp - lr)[want], atol=1e-5)


def test_step_sums_add_up_to_the_trajectory_log_ratio_and_scale_with_beta(micro):
    policy, reference, tok = micro
    (ts,) = LogRatioScorer(policy, reference, tok).score(_trajs()[:1])
    a = progress_advantage(ts, beta=1.0)
    assert a.shape == (3,)
    assert a.sum() == pytest.approx(ts.log_ratio.sum())
    np.testing.assert_allclose(progress_advantage(ts, beta=0.1), 0.1 * a)
    with pytest.raises(ProgressAdvantageError, match="beta"):
        progress_advantage(ts, beta=0.0)


def test_same_model_scores_zero_and_batching_does_not_matter(micro):
    policy, _, tok = micro
    trajs = _trajs()
    same = LogRatioScorer(policy, copy.deepcopy(policy), tok).score(trajs)
    assert all(np.abs(ts.log_ratio).max() < 1e-5 for ts in same)
    one = LogRatioScorer(policy, micro[1], tok, batch_size=1).score(trajs)
    many = LogRatioScorer(policy, micro[1], tok, batch_size=8).score(trajs)
    for x, y in zip(one, many, strict=True):
        np.testing.assert_allclose(x.log_ratio, y.log_ratio, atol=1e-5)


def test_peft_adapter_switched_off_is_the_reference(micro):
    peft = pytest.importorskip("peft")
    base, _, tok = micro
    model = peft.get_peft_model(
        copy.deepcopy(base), peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"])
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    trajs = _trajs()
    toggled = LogRatioScorer(model, None, tok).score(trajs)
    explicit = LogRatioScorer(model, base, tok).score(trajs)
    for x, y in zip(toggled, explicit, strict=True):
        np.testing.assert_allclose(x.log_ratio, y.log_ratio, atol=1e-5)
    assert np.abs(toggled[0].log_ratio).max() > 1e-3


def test_chat_model_path_matches_the_direct_path(micro):
    policy, reference, tok = micro
    trajs = _trajs()
    direct = LogRatioScorer(policy, reference, tok).score(trajs)
    via_api = ChatModelScorer(
        TransformersChat(policy, tok), TransformersChat(reference, tok), tok
    ).score(trajs)
    for x, y in zip(direct, via_api, strict=True):
        assert (x.step == y.step).all()
        np.testing.assert_allclose(x.log_ratio, y.log_ratio, atol=1e-4)


def test_rejects_policy_and_reference_with_different_tokenizers(micro):
    from paperstack import tiny

    policy, reference, tok = micro
    other = tiny.build_tokenizer()
    other.add_tokens(["<extra>"])
    with pytest.raises(ProgressAdvantageError, match="different tokenizers"):
        LogRatioScorer(policy, reference, tok, reference_tokenizer=other)
    bigger = tiny.build_model("micro", other, 0)
    with pytest.raises(ProgressAdvantageError, match="different vocabularies"):
        LogRatioScorer(policy, bigger, tok)
    with pytest.raises(ProgressAdvantageError, match="no peft adapter"):
        LogRatioScorer(policy, None, tok)


def test_confidence_baselines_come_from_the_same_pass(micro):
    policy, reference, tok = micro
    (ts,) = LogRatioScorer(policy, reference, tok, features=True).score(_trajs()[:1])
    scores = confidence_trajectory_scores(ts)
    assert set(scores) == {"mean-logprob", "self-certainty", "bottom10-confidence"}
    assert scores["self-certainty"] >= 0  # a KL divergence
    assert scores["mean-logprob"] == pytest.approx(ts.policy_logp.mean())
    assert all(v.shape == (3,) for v in confidence_step_scores(ts).values())
    assert ts.features is not None
    assert ts.features.shape == (3, 32)


@pytest.mark.gpu
def test_cuda_scores_match_cpu(micro):
    policy, reference, tok = micro
    trajs = _trajs()
    cpu = LogRatioScorer(policy, reference, tok).score(trajs)
    gpu = LogRatioScorer(copy.deepcopy(policy).cuda(), copy.deepcopy(reference).cuda(), tok).score(
        trajs
    )
    for x, y in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(x.log_ratio, y.log_ratio, atol=1e-3)


# ----------------------------------------------------------------------------- every template

ZOO_TEMPLATES = ["llama", "qwen2", "qwen3", "mistral", "gpt2"]


def _whitespace_trajs():
    """Contents with leading/trailing whitespace and short digits that also occur elsewhere in
    the rendering: what trips a verbatim search under Llama-3's trimming template."""
    return [
        Trajectory.from_lines("  What is 3+4*2?\n", "\n 4*2=8\n3+8=11\nAnswer: 11  \n", id="w"),
        Trajectory.from_lines("2", " 2 ", id="short"),
        Trajectory.from_turns(
            [
                {"role": "user", "content": " start "},
                {"role": "assistant", "content": "  look\n"},
                {"role": "user", "content": "a door\n\n"},
                {"role": "assistant", "content": "\nopen it "},
            ],
            id="turns",
        ),
    ]


@pytest.mark.parametrize("name", ZOO_TEMPLATES)
def test_steps_are_located_under_every_zoo_template(name):
    """Every step's span in the rendering holds the step's text (up to the whitespace the
    template trims), under each zoo checkpoint's template and GPT-2's fallback transcript."""
    from progress_advantage.scoring import _render
    from transformers import AutoTokenizer

    from paperstack.testing import zoo

    tok = AutoTokenizer.from_pretrained(zoo.checkpoint(name))
    for traj in _whitespace_trajs():
        text, starts, ends = _render(tok, traj)
        for k, step in enumerate(traj.step_texts()):
            got = text[starts[k] : ends[k]]
            assert got.strip() == step.strip(), (name, traj.id, k, got, step)
        # spans in order and inside the assistant turns, never inside the template's own text
        assert np.all(np.diff(starts) > 0)


@pytest.mark.parametrize("name", ZOO_TEMPLATES)
def test_scorer_runs_on_every_zoo_checkpoint(name):
    """The scorer on each zoo checkpoint: every step gets tokens, and a model scored against
    itself has log-ratio 0 (the ratio's tokens are the same on both sides)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paperstack.testing import zoo

    path = zoo.checkpoint(name)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    scored = LogRatioScorer(model, model, tok).score(_whitespace_trajs())
    for ts, traj in zip(scored, _whitespace_trajs(), strict=True):
        assert set(ts.step.tolist()) == set(range(traj.n_steps))
        np.testing.assert_allclose(ts.log_ratio, 0.0, atol=1e-6)


def test_a_template_that_rewrites_content_is_refused_in_one_line(micro):
    _model, _, tok = micro
    tok = copy.deepcopy(tok)
    tok.chat_template = "{% for m in messages %}{{ m['content'] | upper }}\n{% endfor %}"
    with pytest.raises(ProgressAdvantageError, match="message 0 does not appear"):
        LogRatioScorer(_model, _model, tok).score(
            [Trajectory.from_lines("what", "one\ntwo", id="x")]
        )
