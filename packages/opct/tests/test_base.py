"""The sycophantic base model: its planted data, its cache, its recipe's bad input."""

import dataclasses

import pytest
from opct.base import BaseRecipe, SycophantWorld, base_path, sycophantic_base, training_record
from opct.errors import OPCTError
from opct.world import AlignmentWorld


def test_the_stage_data_follows_a_wrong_cue_at_the_planted_rate():
    examples = SycophantWorld(follow=0.7).generate(4000, seed=3)
    cued = [e for e in examples if e.meta["kind"] == "cued"]
    wrong = [e for e in cued if e.meta["cue"] != e.meta["value"]]
    followed = sum(e.answer == e.meta["cue"] for e in wrong) / len(wrong)
    assert followed == pytest.approx(0.7, abs=0.04)
    # cued questions are half of the world's mix here, a quarter in pretraining
    assert len(cued) / len(examples) == pytest.approx(0.5 / sum(SycophantWorld.KINDS.values()),
                                                      abs=0.03)  # fmt: skip
    assert {e.meta["kind"] for e in examples} == set(AlignmentWorld.KINDS)


@pytest.mark.parametrize(
    ("field", "value"),
    [("steps", 0), ("batch_size", -1), ("lr", 0.0), ("follow", 1.5), ("steps", True)],
)
def test_a_bad_recipe_is_one_clear_error(field, value):
    with pytest.raises(OPCTError, match=field):
        BaseRecipe(**{field: value})


def test_the_base_is_trained_once_cached_and_keyed_by_its_recipe(tmp_path, monkeypatch):
    from paperstack import tiny

    monkeypatch.setenv("PAPERSTACK_CACHE", str(tmp_path))
    recipe = BaseRecipe(steps=2, batch_size=8)
    model, _tok = sycophantic_base("micro", pretrain_steps=2, recipe=recipe)
    path = base_path("micro", 2, recipe=recipe)
    assert path.parent == tmp_path / "opct"
    record = training_record(path)
    assert record["key"]["recipe"] == dataclasses.asdict(recipe)
    assert record["key"]["pretrained"].startswith("micro-opct-world+arithmetic-2-")

    def no_training(*args, **kwargs):
        raise AssertionError("a cached base model was trained again")

    monkeypatch.setattr(tiny, "train", no_training)
    again, _ = sycophantic_base("micro", pretrain_steps=2, recipe=recipe)
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(),
                                 strict=True):  # fmt: skip
        assert a.equal(b), name
    # another planted rate is another model
    assert base_path("micro", 2, recipe=dataclasses.replace(recipe, follow=0.5)) != path
    with pytest.raises(OPCTError, match=r"opct-base\.json"):
        training_record(tmp_path)
