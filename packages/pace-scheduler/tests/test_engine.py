"""Pace as a scheduler of transformers' continuous-batching engine, on a micro toy model."""

import numpy as np
import pytest
from conftest import request
from pace_scheduler import PaceSchedulerError
from pace_scheduler.engine import EngineSession, EngineSetup, PaceCBScheduler, register
from pace_scheduler.latency import fit, r_squared
from pace_scheduler.policies import make_policy
from pace_scheduler.profile import ProfileConfig, toy_model
from transformers.generation.continuous_batching import scheduler as cb_scheduler

SETUP = EngineSetup(num_blocks=256, max_requests_per_batch=32, branch_len_hint=6, cp_len_hint=14)


@pytest.fixture(scope="module")
def session():
    with EngineSession(toy_model("micro"), SETUP) as s:
        yield s


def _forking_requests():
    return [
        request("a", 0.0, serial=(4, 3), forks=((6, 9, 5, 7),), tpot=1.0, prompt=20),
        request("b", 0.001, serial=(5,), forks=(), tpot=1.0, prompt=12),
        request("c", 0.002, serial=(3, 2), forks=((4, 4),), tpot=1.0, prompt=40),
    ]


def test_the_engine_builds_the_registered_scheduler():
    name, cls = register(lambda: make_policy("irp-eager"), SETUP, 128)
    try:
        assert cb_scheduler.SCHEDULER_MAPPING[name] is cls
        assert issubclass(cls, cb_scheduler.FIFOScheduler)
    finally:
        cb_scheduler.SCHEDULER_MAPPING.pop(name)


def test_pace_serves_forking_requests_in_the_engine(session, h200):
    reqs = _forking_requests()
    res = session.serve(reqs, lambda: make_policy("pace", h200), name="pace")
    assert isinstance(session.scheduler, PaceCBScheduler)
    assert res.finished.all()
    assert res.steps > 0
    assert res.step_times is not None
    assert res.step_features.shape == (res.step_times.size, 5)
    # every program decoded exactly its tokens: the context is prompt + every segment + branches
    for spec in reqs:
        program = session.scheduler.programs[spec.id]
        assert len(program.context) == spec.prompt_tokens + spec.total_tokens
        assert program.first_token is not None
        assert program.finish >= program.first_token


def test_irp_off_runs_one_branch_at_a_time_and_eager_runs_them_together(session):
    reqs = _forking_requests()
    off = session.serve(reqs, lambda: make_policy("irp-off"), name="irp-off")
    eager = session.serve(reqs, lambda: make_policy("irp-eager"), name="irp-eager")
    assert off.finished.all()
    assert eager.finished.all()
    assert off.mean_width == 1.0
    assert eager.mean_width > 2.0
    assert eager.steps < off.steps  # concurrent branches shorten the critical path


def test_branches_share_their_parents_prefix_blocks(session, monkeypatch):
    matched = []
    cache = session.processor.cache
    original = cache.search_prefix_match

    def spy(request_id, prompt_ids):
        n = original(request_id, prompt_ids)
        if "/b" in request_id:
            matched.append(n)
        return n

    monkeypatch.setattr(cache, "search_prefix_match", spy)
    session.serve(_forking_requests()[:1], lambda: make_policy("irp-eager"))
    # prompt 20 + segment 4 = 24 tokens of context: the first 16-token page is shared
    assert matched
    assert all(n >= SETUP.page_size for n in matched)


def test_a_prompt_larger_than_the_kv_cache_is_rejected_and_does_not_block(session):
    capacity = session.scheduler.capacity_tokens
    reqs = [
        request("huge", 0.0, serial=(2,), forks=(), tpot=1.0, prompt=capacity + 1),
        *_forking_requests(),
    ]
    res = session.serve(reqs, lambda: make_policy("irp-eager"))
    assert [rid for rid, _ in res.rejected] == ["huge"]
    assert "the cache holds" in res.rejected[0][1]
    assert res.finished[1:].all()
    assert not res.met[0]


def test_profile_records_real_steps_that_the_model_fits(session):
    records = session.profile(ProfileConfig(batch_sizes=(1, 4, 8), contexts=(8, 40), new_tokens=3))
    decode = [r for r in records if r["kind"] == "decode"]
    assert decode
    assert all(r["n_decode"] <= r["batch"] for r in decode)
    for b in (1, 4, 8):  # some step decodes the whole group at once
        assert max(r["n_decode"] for r in decode if r["batch"] == b) == b
    x = np.array([[r[k] for k in ("n_decode", "sum_ctx", "prefill_tokens", "prefill_attn",
                                  "prefill_ctx")] for r in records])  # fmt: skip
    y = np.array([r["seconds"] for r in records])
    model, r2 = fit(x, y)
    assert r2 == pytest.approx(r_squared(y, model.predict(x)))
    assert (y > 0).all()


def test_the_policy_sees_the_measured_steps(session, h200):
    seen = []
    policy = make_policy("pace", h200)
    original = policy.observe
    policy.observe = lambda f, s: (seen.append(s), original(f, s))[1]
    res = session.serve(_forking_requests(), lambda: policy)
    assert len(seen) == res.steps
    assert np.allclose(sorted(seen), sorted(res.step_times))


def test_the_public_generate_batch_runs_with_the_registered_scheduler():
    """The engine's own entry point (background thread, its own loop) with our scheduler."""
    from transformers import GenerationConfig

    model = toy_model("micro")
    name, _ = register(lambda: make_policy("irp-eager"), SETUP, int(model.config.vocab_size))
    try:
        out = model.generate_batch(
            [[9, 10, 11, 12], [13, 14, 15]],
            generation_config=GenerationConfig(do_sample=False, eos_token_id=-1, max_new_tokens=4),
            continuous_batching_config=SETUP.config(name),
            warmup=False,
        )
    finally:
        cb_scheduler.SCHEDULER_MAPPING.pop(name)
    assert len(out) == 2
    assert all(len(o.generated_tokens) == 4 for o in out.values())


def test_engine_setup_rejects_impossible_sizes():
    with pytest.raises(PaceSchedulerError, match="page_size"):
        EngineSetup(page_size=2)
    with pytest.raises(PaceSchedulerError, match="num_blocks"):
        EngineSetup(num_blocks=0)
    with pytest.raises(PaceSchedulerError, match="safety_margin"):
        EngineSetup(safety_margin=1.0)


@pytest.mark.gpu
def test_the_engine_serves_forks_on_cuda(h200):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    with EngineSession(toy_model("micro").to("cuda"), SETUP, "cuda") as s:
        res = s.serve(_forking_requests(), lambda: make_policy("pace", h200))
    assert res.finished.all()
    assert (res.step_times > 0).all()
