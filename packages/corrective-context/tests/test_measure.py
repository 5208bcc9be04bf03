import json

import pytest
import torch
from corrective_context import CorrectiveContextError
from corrective_context.cli import main
from corrective_context.measure import measure
from transformers.modeling_outputs import CausalLMOutputWithPast

from paperstack import tiny

QUERY = "Q: the capital of France? A:"
ITEMS = ["Paris is the capital of France.", "Bananas are yellow.", "Rome is in Italy."]


@pytest.fixture(scope="module")
def lm():
    torch.set_num_threads(1)
    tokenizer = tiny.build_tokenizer(model_max_length=160)
    return tiny.build_model(tiny.QUICK_PRESET, tokenizer, seed=0), tokenizer


def test_every_item_gets_a_decomposed_correction_and_attention_mass(lm):
    model, tokenizer = lm
    before = model.config._attn_implementation
    m = measure(model, tokenizer, QUERY, ITEMS, " Paris")
    assert model.config._attn_implementation == before  # the eager pass is undone
    assert [i.index for i in m.items] == [0, 1, 2]
    for item in m.items:
        p = item.probability
        assert p.regime in ("under", "proper", "over")
        assert p.error_after == pytest.approx(
            ((1 - p.ratio) ** 2 + p.off_axis**2) ** 0.5 * p.error_norm
        )
        assert item.hidden_norm > 0
        assert 0 < item.attention_mass < 1
    assert sum(i.attention_mass for i in m.items) < 1  # the query and BOS take the rest


def test_an_item_longer_than_the_context_is_one_error(lm):
    model, tokenizer = lm
    with pytest.raises(CorrectiveContextError, match=r"item 1: \d+ tokens with the query, longer"):
        measure(model, tokenizer, QUERY, ["short", "x" * 300], " Paris")


def test_an_empty_pool_is_one_error(lm):
    model, tokenizer = lm
    with pytest.raises(CorrectiveContextError, match="candidate pool is empty"):
        measure(model, tokenizer, QUERY, [], " Paris")


class _NoHiddenStates(torch.nn.Module):
    """A causal LM that ignores output_hidden_states (as some custom models do)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config

    def forward(self, input_ids, **kwargs):
        return CausalLMOutputWithPast(logits=self.inner(input_ids=input_ids).logits)

    def get_output_embeddings(self):
        return self.inner.get_output_embeddings()


def test_a_model_without_hidden_states_is_one_error(lm):
    model, tokenizer = lm
    with pytest.raises(
        CorrectiveContextError, match="_NoHiddenStates does not expose hidden states"
    ):
        measure(_NoHiddenStates(model), tokenizer, QUERY, ITEMS, " Paris")


def test_measure_command_writes_measurements(model_dir, tmp_path, capsys):
    items = tmp_path / "items.txt"
    items.write_text("\n".join(ITEMS) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code = main(["measure", "--model", str(model_dir), "--query", QUERY, "--answer", " Paris",
                 "--items", str(items), "--out", str(out)])  # fmt: skip
    assert code == 0
    data = json.loads((out / "measurements.json").read_text())
    assert len(data["items"]) == 3
    assert "item 0:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "match"),
    [("", "candidate pool is empty"), ("x" * 300 + "\n", "longer than the model's context")],
)
def test_measure_command_bad_items_are_one_line_errors(model_dir, tmp_path, capsys, content, match):
    items = tmp_path / "items.txt"
    items.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["measure", "--model", str(model_dir), "--query", QUERY, "--answer", " Paris",
              "--items", str(items), "--out", str(tmp_path / "o")])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert match in err


def test_measure_command_refuses_a_truncated_model(model_dir, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in model_dir.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    items = tmp_path / "items.txt"
    items.write_text("a\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["measure", "--model", str(broken), "--query", QUERY, "--answer", " Paris",
              "--items", str(items), "--out", str(tmp_path / "o")])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "model.safetensors" in err


def test_the_selector_runs_on_a_transformers_model(lm):
    from corrective_context import SelectorConfig
    from corrective_context.measure import select_items

    model, tokenizer = lm
    inputs = ["Q: the capital of Italy? A:", "Q: the colour of bananas? A:", "Q: 2+2? A:"]
    answers = [" Rome", " yellow", " 4"]
    items = [i + a for i, a in zip(inputs, answers, strict=True)]
    sel = select_items(model, tokenizer, QUERY, items, inputs, answers,
                       config=SelectorConfig(budget=2))  # fmt: skip
    assert len(sel.chosen) <= 2
    assert set(sel.chosen) <= {0, 1, 2}
    assert sel.error_estimate.shape == (len(tokenizer),)
    with pytest.raises(CorrectiveContextError, match="candidate pool is empty"):
        select_items(model, tokenizer, QUERY, [], [], [])


def _candidates(tmp_path, lines):
    path = tmp_path / "candidates.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_select_command_writes_the_selection(model_dir, tmp_path, capsys):
    path = _candidates(tmp_path, [
        {"input": "Q: the capital of Italy? A:", "answer": " Rome"},
        {"input": "Q: the colour of bananas? A:", "answer": " yellow"},
    ])  # fmt: skip
    out = tmp_path / "out"
    code = main(["select", "--model", str(model_dir), "--query", QUERY, "--items", str(path),
                 "--budget", "1", "--out", str(out)])  # fmt: skip
    assert code == 0
    data = json.loads((out / "selection.json").read_text())
    assert len(data["chosen"]) <= 1
    assert "of 2 items" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("lines", "match"),
    [([{"input": "Q:"}], "line 1: needs string fields"), ([], "candidate pool is empty")],
)
def test_select_command_bad_candidates_are_one_line_errors(
    model_dir, tmp_path, capsys, lines, match
):
    path = _candidates(tmp_path, lines) if lines else tmp_path / "empty.jsonl"
    if not lines:
        path.write_text("", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["select", "--model", str(model_dir), "--query", QUERY, "--items", str(path),
              "--out", str(tmp_path / "o")])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert match in err
