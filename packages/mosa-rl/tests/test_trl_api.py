"""The private trl API MOSATrainer overrides or reads, pinned: when trl changes it, this fails
loudly (and names what changed) instead of MOSA silently dropping out of the loss."""

import inspect

import pytest
import trl
from packaging.version import Version
from trl import GRPOTrainer


def _parameters(func):
    return list(inspect.signature(func).parameters)


def test_trl_is_in_the_tested_minor_range():
    version = Version(trl.__version__)
    assert Version("1.16") <= version < Version("1.17"), (
        f"trl {trl.__version__}: MOSATrainer is written and tested against trl 1.16.x; "
        "check the overridden methods below before widening the pin in pyproject.toml"
    )


@pytest.mark.parametrize(
    ("name", "parameters"),
    [
        ("_generate_and_score_completions", ["self", "inputs"]),
        ("_compute_loss", ["self", "model", "inputs"]),
        ("compute_loss", ["self", "model", "inputs", "return_outputs", "num_items_in_batch"]),
    ],
)
def test_overridden_methods_keep_their_signatures(name, parameters):
    assert _parameters(getattr(GRPOTrainer, name)) == parameters, (
        f"GRPOTrainer.{name} changed signature in trl {trl.__version__}"
    )


def test_compute_loss_still_reads_the_keys_mosa_relies_on():
    source = inspect.getsource(GRPOTrainer._compute_loss)
    for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask"):
        assert f'"{key}"' in source, f"GRPOTrainer._compute_loss no longer reads {key!r}"
    assert "current_gradient_accumulation_steps" in source
    # MOSATrainer logs its KL terms into ``self._metrics[mode]`` beside trl's own.
    assert "self._metrics[mode]" in source, "GRPOTrainer._compute_loss no longer logs per mode"


def test_helpers_mosa_imports_from_trl_exist():
    from trl.models import prepare_deepspeed
    from trl.trainer.utils import use_adapter

    assert _parameters(use_adapter) == ["model", "adapter_name"]
    assert _parameters(prepare_deepspeed) == ["model", "accelerator"]


def test_cast_lm_head_to_fp32_is_still_a_config_field():
    fields = trl.GRPOConfig.__dataclass_fields__
    assert "cast_lm_head_to_fp32" in fields
    assert "beta" in fields
    assert "loss_type" in fields
