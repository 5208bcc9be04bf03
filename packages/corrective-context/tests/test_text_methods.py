"""Every selection method by name on text items and a transformers model (select_items and
`corrective-context select`): valid, deterministic selections, known answers for MiniLM top-k
and BM25, and one-line errors for bad input."""

import json

import pytest
import torch
from corrective_context import CorrectiveContextError, SelectorConfig
from corrective_context.baselines import METHODS, rank_texts
from corrective_context.cli import main
from corrective_context.measure import select_items

from paperstack import tiny

QUERY = "Q: which city is the capital of France? A:"
INPUTS = [
    "Q: which city is the capital of Italy? A:",
    "Q: what colour are ripe bananas? A:",
    "Q: what is two plus two? A:",
    "Q: which city is the capital of Spain? A:",
    "Q: what do bees make? A:",
]
ANSWERS = [" Rome", " yellow", " 4", " Madrid", " honey"]
ITEMS = [i + a for i, a in zip(INPUTS, ANSWERS, strict=True)]


@pytest.fixture(scope="module")
def lm():
    torch.set_num_threads(1)
    tokenizer = tiny.build_tokenizer(model_max_length=400)
    return tiny.build_model(tiny.QUICK_PRESET, tokenizer, seed=0), tokenizer


@pytest.mark.parametrize("method", METHODS)
def test_every_method_returns_a_valid_deterministic_selection(lm, method):
    model, tokenizer = lm
    config = SelectorConfig(budget=3)

    def run():
        return select_items(model, tokenizer, QUERY, ITEMS, INPUTS, ANSWERS, method=method,
                            config=config, seed=1)  # fmt: skip

    first, second = run(), run()
    assert first.method == method
    assert first.chosen == second.chosen
    assert first.order == second.order
    assert len(set(first.chosen)) == len(first.chosen)
    assert set(first.chosen) <= set(range(len(ITEMS)))
    if method == "all-items":
        assert first.chosen == list(range(len(ITEMS)))  # they all fit the 400-token context
    elif method == "corrective":
        assert len(first.chosen) <= 3  # the selector may choose fewer (possibly none)
    else:
        assert len(first.chosen) == 3  # a baseline fills its budget when the items fit


def test_a_baseline_keeps_the_prefix_of_its_ranking_that_fits_the_context(lm):
    model, tokenizer = lm
    long = ["word " * 25 + str(i) for i in range(4)]  # 127 tokens each: 2 fit with the query
    sel = select_items(model, tokenizer, QUERY, long, method="all-items")
    assert sel.order == [0, 1, 2, 3]
    assert sel.chosen == [0, 1]


def test_random_depends_on_its_seed_only():
    pool = [f"item {i}" for i in range(20)]
    picks = {tuple(rank_texts("random", QUERY, pool, 5, seed)) for seed in range(4)}
    assert len(picks) > 1
    assert rank_texts("random", QUERY, pool, 5, 3) == rank_texts("random", QUERY, pool, 5, 3)


def test_minilm_top_k_ranks_the_paraphrase_above_unrelated_items():
    pool = [
        "Bananas are rich in potassium.",
        "The train leaves the station at noon.",
        "Paris is the capital city of France.",
        "Gradient descent minimises a loss.",
    ]
    ranking = rank_texts("top-k", "What is the capital of France?", pool, 4)
    assert ranking[0] == 2
    assert sorted(ranking) == [0, 1, 2, 3]


def test_bm25_ranks_the_item_sharing_the_rare_words_first():
    common = [
        "the cat of the house sat on the mat of the hall",
        "the capital of the country is by the river of gold",
        "the dog of the farm ran to the gate of the field",
        "the king of the hill and the queen of the sea",
        "the song of the bird at the end of the day",
    ]
    pool = [*common[:3], "axolotl salamanders regrow limbs", *common[3:]]
    ranking = rank_texts("bm25", "the habitat of the axolotl", pool, 6)
    assert ranking[0] == 3  # shares only "axolotl" with the query: the rare word outweighs
    assert sorted(ranking) == list(range(6))  # "the" and "of", common to the other five


def test_dpp_ranks_over_minilm_and_skips_a_duplicate():
    pool = [
        "Paris is the capital of France.",
        "Paris is the capital of France.",
        "Bees make honey from nectar.",
    ]
    ranking = rank_texts("dpp", "What is the capital of France?", pool, 2)
    assert ranking[0] in (0, 1)
    assert set(ranking) != {0, 1}


@pytest.mark.parametrize("method", METHODS)
def test_an_empty_pool_is_one_error(lm, method):
    model, tokenizer = lm
    with pytest.raises(CorrectiveContextError, match="candidate pool is empty"):
        select_items(model, tokenizer, QUERY, [], [], [], method=method)


def test_an_unknown_method_is_one_error(lm):
    model, tokenizer = lm
    with pytest.raises(CorrectiveContextError, match="method 'knn': unknown; choose one of"):
        select_items(model, tokenizer, QUERY, ITEMS, method="knn")


@pytest.mark.parametrize("method", METHODS)
def test_an_item_longer_than_the_context_is_one_error(lm, method):
    model, tokenizer = lm
    items = ["short", "x" * 500]
    with pytest.raises(CorrectiveContextError, match=r"item 1: \d+ tokens with the query, longer"):
        select_items(model, tokenizer, QUERY, items, items, [" a", " b"], method=method)


def test_the_corrective_method_needs_inputs_and_answers(lm):
    model, tokenizer = lm
    with pytest.raises(CorrectiveContextError, match="needs each item's input and known answer"):
        select_items(model, tokenizer, QUERY, ITEMS)


def _jsonl(tmp_path, lines):
    path = tmp_path / "pool.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_select_command_runs_a_baseline_on_text_only_items(model_dir, tmp_path, capsys):
    path = _jsonl(tmp_path, [{"text": t} for t in ITEMS])
    out = tmp_path / "out"
    code = main(["select", "--model", str(model_dir), "--query", QUERY, "--items", str(path),
                 "--method", "bm25", "--budget", "2", "--out", str(out)])  # fmt: skip
    assert code == 0
    data = json.loads((out / "selection.json").read_text())
    assert data["method"] == "bm25"
    assert set(data["chosen"]) == {0, 3}  # the capitals share "city", "capital" with the query
    assert data["items"] == [ITEMS[i] for i in data["chosen"]]
    assert "bm25: chose 2 of 5 items" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "lines", "match"),
    [
        (["--method", "knn"], [{"text": "a"}], "method 'knn': unknown"),
        (["--method", "bm25"], [{"input": "Q:"}], "line 1: needs a string field 'text'"),
        (["--method", "corrective"], [{"text": "a"}], "line 1: needs string fields 'input'"),
        (["--method", "top-k"], [{"text": "x" * 500}], "longer than the model's context"),
    ],
)
def test_select_command_bad_input_is_one_line(model_dir, tmp_path, capsys, flags, lines, match):
    path = _jsonl(tmp_path, lines)
    with pytest.raises(SystemExit) as exc:
        main(["select", "--model", str(model_dir), "--query", QUERY, "--items", str(path),
              *flags, "--out", str(tmp_path / "o")])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert match in err


def test_without_the_embed_extra_minilm_methods_name_the_extra(monkeypatch):
    from corrective_context import baselines

    from paperstack.embed import EmbedError

    def missing():
        raise EmbedError("the all-MiniLM-L6-v2 model package is not installed")

    monkeypatch.setattr(baselines, "_embedder", missing)
    monkeypatch.setattr(baselines, "_embed_extra_installed", lambda: False)
    for method in ("top-k", "dpp"):
        with pytest.raises(CorrectiveContextError, match=r"corrective-context\[embed\]"):
            rank_texts(method, QUERY, ITEMS, 2)
    assert rank_texts("bm25", QUERY, ITEMS, 1) == [0]  # BM25 needs no extra


def test_a_damaged_minilm_cache_reaches_the_user_as_the_cores_line(monkeypatch):
    """Issue #46: with the extra installed, a truncated MiniLM entry in the cache is not a
    missing extra; the core's line (naming the folder and the fix) must reach the user, not
    "pip install 'corrective-context[embed]'"."""
    from corrective_context import baselines

    from paperstack.embed import EmbedError

    said = "/cache/minilm: cannot load the model (SafetensorError: truncated); remove that folder"

    def damaged():
        raise EmbedError(said)

    monkeypatch.setattr(baselines, "_embedder", damaged)
    monkeypatch.setattr(baselines, "_embed_extra_installed", lambda: True)
    with pytest.raises(EmbedError) as exc:
        baselines.embed_texts(["a text"])
    assert str(exc.value) == said
    monkeypatch.setattr(baselines, "_embed_extra_installed", lambda: False)
    with pytest.raises(CorrectiveContextError, match=r"pip install 'corrective-context\[embed\]'"):
        baselines.embed_texts(["a text"])


@pytest.mark.parametrize("command", ["select", "measure"])
def test_out_is_prepared_before_the_model_is_loaded(model_dir, tmp_path, capsys, command):
    """A dangling --out link was met only after the model ran (a FileExistsError traceback
    from mkdir); the core's preparation refuses it in one line first, and a folder made for
    a run that then fails is removed again."""
    path = _jsonl(
        tmp_path, [{"input": i, "answer": a} for i, a in zip(INPUTS, ANSWERS, strict=True)]
    )
    if command == "measure":
        path = tmp_path / "items.txt"
        path.write_text("\n".join(ITEMS) + "\n")
    rest = ["--answer", " Paris"] if command == "measure" else ["--method", "bm25"]
    dangling = tmp_path / "gone"
    dangling.symlink_to(tmp_path / "deleted")
    argv = [command, "--model", str(model_dir), "--query", QUERY, "--items", str(path), *rest]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(dangling)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "dangling symbolic link" in err
    fresh = tmp_path / "fresh"
    with pytest.raises(SystemExit):
        main([*argv[:2], str(tmp_path / "no-model"), *argv[3:], "--out", str(fresh)])
    assert not fresh.exists()
