"""The vLLM plug-in against vLLM's scheduler classes, or a recorded copy of their interface.

vLLM does not install beside the CPU build of torch these tests run on; where it does not
import, ``tests/recorded_vllm`` stands in (its README says what it records and what it cannot
show). The ``gpu`` test at the end needs CUDA and the real vLLM.
"""

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pace_scheduler import PaceSchedulerError
from pace_scheduler import vllm_plugin as vp

HAS_VLLM = importlib.util.find_spec("vllm") is not None
RECORDED = Path(__file__).parent / "recorded_vllm"


@pytest.fixture
def vllm(monkeypatch):
    """vLLM's scheduler modules: the real ones, else the recorded interface."""
    if not HAS_VLLM:
        monkeypatch.syspath_prepend(str(RECORDED))
    monkeypatch.setattr(vp, "_CLASSES", {})
    from vllm.v1.core.sched import async_scheduler, scheduler
    from vllm.v1.request import Request, RequestStatus, SamplingParams

    yield SimpleNamespace(
        Scheduler=scheduler.Scheduler,
        AsyncScheduler=async_scheduler.AsyncScheduler,
        Request=Request,
        RequestStatus=RequestStatus,
        SamplingParams=SamplingParams,
    )
    if not HAS_VLLM:
        for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
            del sys.modules[name]


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def make(vllm, *, async_scheduling=True, blocks=512, clock=None, tpot_ms=None, monkeypatch=None):
    if tpot_ms is not None:
        monkeypatch.setenv("PACE_TPOT_SLO_MS", str(tpot_ms))
    config = SimpleNamespace(
        scheduler_config=SimpleNamespace(
            async_scheduling=async_scheduling, max_num_seqs=16, max_num_batched_tokens=256
        )
    )
    # as vLLM's EngineCore calls the class it resolved from --scheduler-cls
    sched = vp.PaceScheduler(
        vllm_config=config,
        kv_cache_config=SimpleNamespace(num_blocks=blocks),
        structured_output_manager=None,
        block_size=16,
        include_finished_set=False,
        log_stats=False,
    )
    if clock is not None:
        sched.pace_clock = clock
    return sched


def req(vllm, rid, n_prompt=20, max_tokens=4, tag=None):
    extra = {vp.PACE_KEY: tag} if tag else None
    return vllm.Request(rid, list(range(n_prompt)), vllm.SamplingParams(max_tokens, extra))


def fork(vllm, sched, parent, n, max_tokens=4, **tag):
    for j in range(n):
        args = vp.branch_extra_args(parent, j, **tag)[vp.PACE_KEY]
        sched.add_request(req(vllm, f"{parent}/b{j}", max_tokens=max_tokens, tag=args))


def run(sched, clock, steps=200, dt=0.01):
    outs = []
    for _ in range(steps):
        if not sched.has_unfinished_requests():
            break
        out = sched.schedule()
        clock.t += dt
        sched.update_from_output(out, None)
        outs.append(out)
    return outs


def test_module_imports_without_vllm_and_tags_branches():
    reqs = vp.branch_requests("req-1", "PREFIX ", ["A:", "B:", "C:"], tpot_slo_ms=40)
    assert [r.prompt for r in reqs] == ["PREFIX A:", "PREFIX B:", "PREFIX C:"]
    tags = [r.extra_args[vp.PACE_KEY] for r in reqs]
    assert [t["branch"] for t in tags] == [0, 1, 2]
    assert all(t["parent"] == "req-1" and t["tpot_slo_ms"] == 40.0 for t in tags)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"tpot_slo_ms": 0}, "tpot_slo_ms"), ({"ttft_slo_ms": float("nan")}, "ttft_slo_ms"),
     ({"expected_tokens": 0}, "expected_tokens")],
)  # fmt: skip
def test_tag_rejects_impossible_values(kwargs, field):
    with pytest.raises(PaceSchedulerError, match=field):
        vp.branch_extra_args("p", 1, **kwargs)


@pytest.mark.skipif(HAS_VLLM, reason="checks the error without vLLM")
def test_building_the_scheduler_without_vllm_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(vp, "_CLASSES", {})
    with pytest.raises(PaceSchedulerError, match="needs vLLM"):
        vp.scheduler_class(True)
    vp.register()  # safe in every process, even without vLLM


def test_the_base_class_follows_async_scheduling(vllm):
    a = make(vllm, async_scheduling=True)
    s = make(vllm, async_scheduling=False)
    assert isinstance(a, vllm.AsyncScheduler)
    assert isinstance(s, vllm.Scheduler)
    assert not isinstance(s, vllm.AsyncScheduler)
    assert type(a).__module__ == "pace_scheduler.vllm_plugin"


def test_step_time_comes_from_update_from_output_under_async_overlap(vllm):
    clock = Clock()
    sched = make(vllm, clock=clock)
    seen = []
    sched.pace.observe = lambda f, s: seen.append(round(s, 6))
    for i in range(3):
        sched.add_request(req(vllm, f"r{i}", max_tokens=8))
    first = sched.schedule()  # step 1 at t=0
    clock.t = 0.001
    second = sched.schedule()  # step 2 scheduled while step 1 runs (async)
    clock.t = 0.010
    sched.update_from_output(first, None)  # step 1 ends
    clock.t = 0.021
    sched.update_from_output(second, None)  # step 2 ran from 0.010 to 0.021
    assert seen == [0.010, 0.011]  # not the 0.001 between the two schedule() calls


def test_first_token_is_stamped_when_it_is_delivered(vllm):
    clock = Clock()
    sched = make(vllm, clock=clock)
    sched.add_request(req(vllm, "r0", n_prompt=20, max_tokens=3))
    out = sched.schedule()  # the whole prompt in one step
    clock.t = 0.5
    assert sched.pace_seen["r0"][1] is None
    sched.update_from_output(out, None)
    assert sched.pace_seen["r0"][1] == 0.5


def test_side_queued_branches_never_starve_without_slack(vllm, monkeypatch):
    """An SLO no step can meet leaves no budget: the serial fallback still runs every branch,
    one at a time."""
    clock = Clock()
    sched = make(vllm, clock=clock, tpot_ms=1e-6, monkeypatch=monkeypatch)
    sched.pace_max_wait = 1e9  # aging off: the fallback alone
    sched.add_request(req(vllm, "other", max_tokens=30))
    fork(vllm, sched, "p", 4, max_tokens=3)
    widths = []
    for _ in range(100):
        if not sched.has_unfinished_requests():
            break
        out = sched.schedule()
        widths.append(sum(rid.startswith("p/") for rid in out.num_scheduled_tokens))
        clock.t += 0.01
        sched.update_from_output(out, None)
    assert not sched.has_unfinished_requests()
    assert max(widths) == 1
    assert sched.pace_released == {"fallback": 3, "aged": 0, "admitted": 0}


def test_a_branch_queued_too_long_is_released_by_aging(vllm, monkeypatch):
    clock = Clock()
    sched = make(vllm, clock=clock, tpot_ms=1e-6, monkeypatch=monkeypatch)
    sched.pace_max_wait = 0.05
    fork(vllm, sched, "p", 2, max_tokens=50)  # branch 0 runs long; branch 1 would wait for it
    run(sched, clock, steps=10)
    assert sched.pace_released["aged"] == 1
    assert "p/b1" not in sched.pace_side


def test_pace_admits_branches_when_the_batch_has_slack(vllm):
    clock = Clock()
    sched = make(vllm, clock=clock)  # 50 ms SLO against ~17 ms H200 steps
    fork(vllm, sched, "p", 4, max_tokens=6, tpot_slo_ms=50)
    outs = run(sched, clock)
    assert not sched.has_unfinished_requests()
    assert sched.pace_released["admitted"] >= 1
    assert max(sum(r.startswith("p/") for r in o.num_scheduled_tokens) for o in outs) > 1


def test_aborting_a_queued_branch_drops_it(vllm):
    sched = make(vllm)
    fork(vllm, sched, "p", 3)
    assert sched.get_num_unfinished_requests() == 3
    aborted = sched.finish_requests(["p/b2"], vllm.RequestStatus.FINISHED_ABORTED)
    assert [r.request_id for r in aborted] == ["p/b2"]
    assert "p/b2" not in sched.requests
    assert sched.get_num_unfinished_requests() == 2


def test_a_bad_environment_value_is_a_one_line_error(vllm, monkeypatch):
    monkeypatch.setenv("PACE_MAX_WAIT_S", "soon")
    with pytest.raises(PaceSchedulerError, match="PACE_MAX_WAIT_S"):
        make(vllm)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed")
def test_end_to_end_branches_share_a_prefix_on_a_gpu(tmp_path):
    """A Qwen3-shaped model with dummy weights; every branch of a fork completes."""
    import json

    from vllm import LLM, SamplingParams

    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "vocab_size": 151936,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    llm = LLM(
        model=str(tmp_path),
        tokenizer="Qwen/Qwen3-0.6B",
        load_format="dummy",
        scheduler_cls="pace_scheduler.vllm_plugin.PaceScheduler",
        enable_prefix_caching=True,
        gpu_memory_utilization=0.3,
    )
    reqs = vp.branch_requests("p0", "Solve step by step. ", ["Branch A:", "Branch B:", "Branch C:"])
    params = [SamplingParams(max_tokens=16, extra_args=r.extra_args) for r in reqs]
    outs = llm.generate([r.prompt for r in reqs], params)
    assert len(outs) == 3
    assert all(len(o.outputs[0].token_ids) > 0 for o in outs)
