import importlib.util

import pytest
from pace_scheduler import PaceSchedulerError
from pace_scheduler import vllm_plugin as vp

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def test_module_imports_without_vllm_and_tags_branches():
    reqs = vp.branch_requests("req-1", "PREFIX ", ["A:", "B:", "C:"], tpot_slo_ms=40)
    assert [r.prompt for r in reqs] == ["PREFIX A:", "PREFIX B:", "PREFIX C:"]
    tags = [r.extra_args[vp.PACE_KEY] for r in reqs]
    assert [t["branch"] for t in tags] == [0, 1, 2]
    assert all(t["parent"] == "req-1" and t["tpot_slo_ms"] == 40.0 for t in tags)


def test_tag_rejects_a_nonpositive_slo():
    with pytest.raises(PaceSchedulerError, match="tpot_slo_ms"):
        vp.branch_extra_args("p", 1, tpot_slo_ms=0)


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError):
        vp.NotAThing  # noqa: B018


@pytest.mark.skipif(HAS_VLLM, reason="checks the error without vLLM")
def test_resolving_the_scheduler_without_vllm_is_a_clear_error():
    with pytest.raises(PaceSchedulerError, match="needs vLLM"):
        vp.make_scheduler_class()
    vp.register()  # safe in every process, even without vLLM


@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed")
def test_scheduler_class_resolves_as_scheduler_cls():
    from vllm.v1.core.sched.scheduler import Scheduler

    cls = vp.PaceScheduler
    assert issubclass(cls, Scheduler)
    assert cls.__module__ == "pace_scheduler.vllm_plugin"


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
