"""Generated verbose CoTs, their gold graphs, and the JSONL loader's bad input."""

import json

import pytest
from minpath import MinPathError, compress, load_jsonl, verbose_traces
from minpath.demo import compress_traces, graph_scores
from minpath.traces import write_jsonl

from paperstack.tasks import Arithmetic

TASK = Arithmetic(min_ops=2, max_ops=3)


def test_traces_are_deterministic_and_carry_every_step_type():
    a, b = verbose_traces(50, seed=3), verbose_traces(50, seed=3)
    assert [t.cot for t in a] == [t.cot for t in b]
    assert [t.cot for t in a] != [t.cot for t in verbose_traces(50, seed=4)]
    kinds = {k for t in a for k in t.types}
    assert kinds == {"restatement", "planning", "computation", "verification", "backtracking",
                     "conclusion"}  # fmt: skip


def test_gold_minimal_path_is_the_tasks_gold_solution_and_verifies():
    for t in verbose_traces(100, seed=0):
        path = "\n".join(t.lines[i].removeprefix("Wait, ") for i in sorted(t.path))
        assert path == t.minimal
        assert TASK.verify_process(t.example, t.minimal)
        assert TASK.verify(t.example, t.cot)  # the verbose CoT still ends in the right answer
        assert len(t.cot) >= len(t.minimal)  # a few problems get no verbosity at all


def test_state_lines_restate_the_expression_left_and_minpath_drops_them():
    from minpath.traces import TraceStyle

    for t in verbose_traces(60, seed=5):
        states = [line for line in t.lines if line.startswith("That leaves ")]
        # the expression after each gold reduction but the last, in order
        tokens, want = list(t.example.meta["tokens"]), []
        for step in t.example.meta["steps"][:-1]:
            left, value = step.split("=")
            for k in range(1, len(tokens), 2):
                if f"{tokens[k - 1]}{tokens[k]}{tokens[k + 1]}" == left:
                    tokens[k - 1 : k + 2] = [int(value)]
                    break
            want.append(f"That leaves {''.join(map(str, tokens))}.")
        assert states == want
        assert all(t.types[t.lines.index(s)] == "restatement" for s in states)
        assert "That leaves" not in compress(t.question, t.cot, gold_answer=t.value).text
    quiet = verbose_traces(20, seed=5, style=TraceStyle(state=0.0))
    assert not any("That leaves" in t.cot for t in quiet)


def test_extraction_recovers_the_gold_graphs_on_most_traces():
    traces = verbose_traces(200, seed=1)
    comp = compress_traces(traces, TASK)
    assert comp.scores["type_accuracy"] > 0.95
    assert comp.scores["edge_f1"] > 0.9
    assert comp.scores["path_exact"] > 0.9
    assert comp.fallbacks < 20
    # every kept text verifies (compressed) or is the original (fallback)
    for t, text in zip(traces, comp.minpath, strict=True):
        assert TASK.verify_process(t.example, text) or text == t.cot


def test_graph_scores_are_perfect_on_gold_and_drop_on_a_wrong_typer():
    traces = verbose_traces(30, seed=2)
    results = [compress(t.question, t.cot, gold_answer=t.value) for t in traces]
    scores = graph_scores(traces, results)

    class AllRestatement:
        name = "bad"

        def type_steps(self, steps):
            return ["restatement"] * (len(steps) - 1) + ["conclusion"]

    worse = graph_scores(traces, [compress(t.question, t.cot, typer=AllRestatement())
                                  for t in traces])  # fmt: skip
    assert worse["type_accuracy"] < scores["type_accuracy"]
    assert worse["path_exact"] == 0.0


def test_jsonl_round_trip(tmp_path):
    traces = verbose_traces(5, seed=0)
    records = load_jsonl(write_jsonl(tmp_path / "t.jsonl", traces))
    assert [(r.question, r.cot, r.answer) for r in records] == [
        (t.question, t.cot, str(t.value)) for t in traces
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'{"question": "1+1=", "cot": "caf\xe9", "answer": "2"}\n',
            r"x\.jsonl: line 1: not UTF-8 .*0xe9",
        ),
        (b"not json\n", r"x\.jsonl: line 1: not JSON"),
        (b'{"question": "1+1=", "answer": "2"}\n', r"x\.jsonl: line 1: field 'cot' is missing"),
        (b"[1, 2]\n", r"x\.jsonl: line 1: expected a JSON object"),
        (b'{"question": "q", "cot": "c", "answer": "2", "edges": [[1]]}\n', r"field 'edges'"),
        (b"\n\n", r"x\.jsonl: no records"),
    ],
)
def test_bad_jsonl_is_one_error_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(MinPathError, match=message):
        load_jsonl(path)


def test_missing_file_and_directory_are_one_error(tmp_path):
    with pytest.raises(MinPathError, match=r"nope\.jsonl: no such file"):
        load_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(MinPathError, match="is a directory"):
        load_jsonl(tmp_path)


def test_second_line_error_names_line_two(tmp_path):
    path = tmp_path / "x.jsonl"
    good = json.dumps({"question": "1+1=", "cot": "1+1=2\nAnswer: 2", "answer": "2"})
    path.write_text(good + "\n" + "{oops\n")
    with pytest.raises(MinPathError, match=r"x\.jsonl: line 2: not JSON"):
        load_jsonl(path)


@pytest.mark.parametrize("seed", range(6))
def test_generator_never_runs_out_of_wrong_values(seed):
    # seed 1 once exhausted the six near misses of a backtrack (every one already a value)
    assert len(verbose_traces(600, seed=seed)) == 600
