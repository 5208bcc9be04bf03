"""The commands on JSONL trajectories: score, best-of-n, uq, attribute and train-policy; their
bad input (files, models, tokenizers, --out) is one line naming what is wrong."""

import json
import shutil

import pytest
from progress_advantage import Trajectory, write_trajectories
from progress_advantage.cli import main


@pytest.fixture(scope="module")
def models(tmp_path_factory, micro):
    policy, reference, tok = micro
    root = tmp_path_factory.mktemp("models")
    for name, m in (("policy", policy), ("reference", reference)):
        m.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return root


def _data(path):
    trajs = []
    answers = {"1+2=": 3, "2*3=": 6}  # known answers (no eval of text)
    for g, (prompt, cands) in enumerate(
        [("1+2=", ["1+2=3\nAnswer: 3", "1+2=4\nAnswer: 4"]), ("2*3=", ["2*3=6\nAnswer: 6"])]
    ):
        for j, c in enumerate(cands):
            ok = c.endswith(str(answers[prompt]))
            trajs.append(
                Trajectory.from_lines(
                    prompt,
                    c,
                    id=f"{g}-{j}",
                    group=str(g),
                    success=ok,
                    first_error=None if ok else 0,
                )
            )
    return write_trajectories(path, trajs)


def test_score_then_uses_on_jsonl(tmp_path, models, capsys):
    data = _data(tmp_path / "t.jsonl")
    scored = tmp_path / "s.jsonl"
    args = ["--policy", str(models / "policy"), "--reference", str(models / "reference")]
    assert main(["score", *args, "--in", str(data), "--out", str(scored), "--beta", "0.1"]) == 0
    rec = [json.loads(x) for x in scored.read_text().splitlines()]
    assert len(rec) == 3
    assert all(len(r["step_scores"]) == 2 for r in rec)
    assert main(["best-of-n", "--in", str(scored), "--out", str(tmp_path / "b.jsonl")]) == 0
    assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 2
    assert main(["uq", "--in", str(scored)]) == 0
    assert main(["attribute", "--in", str(scored)]) == 0
    out = capsys.readouterr().out
    assert "AUROC" in out
    assert "top-1 accuracy" in out


def test_uses_refuse_unscored_trajectories(tmp_path, capsys):
    data = _data(tmp_path / "t.jsonl")
    with pytest.raises(SystemExit) as exc:
        main(["best-of-n", "--in", str(data)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "step_scores" in err
    assert "line 1" in err


def test_trajectories_without_steps_are_a_one_line_error(tmp_path, models, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "score",
                "--policy",
                str(models / "policy"),
                "--reference",
                str(models / "reference"),
                "--in",
                str(bad),
                "--out",
                str(tmp_path / "o.jsonl"),
            ]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("progress-advantage: error:")
    assert "bad.jsonl: line 1" in err


def test_different_tokenizers_are_a_one_line_error(tmp_path, models, capsys):
    from paperstack import tiny

    other = tiny.build_tokenizer()
    other.add_tokens(["<extra>"])
    model = tiny.build_model("micro", other, 0)
    model.save_pretrained(tmp_path / "other")
    other.save_pretrained(tmp_path / "other")
    data = _data(tmp_path / "t.jsonl")
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "score",
                "--policy",
                str(models / "policy"),
                "--reference",
                str(tmp_path / "other"),
                "--in",
                str(data),
                "--out",
                str(tmp_path / "o.jsonl"),
            ]
        )
    assert exc.value.code == 2
    assert "different tokenizers" in capsys.readouterr().err


def test_missing_model_is_a_one_line_error(tmp_path, capsys):
    data = _data(tmp_path / "t.jsonl")
    with pytest.raises(SystemExit):
        main(
            [
                "score",
                "--policy",
                str(tmp_path / "nope"),
                "--reference",
                str(tmp_path / "nope"),
                "--in",
                str(data),
                "--out",
                str(tmp_path / "o.jsonl"),
            ]
        )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no such directory" in err


def test_truncated_model_folder_is_a_one_line_error(tmp_path, models, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(models / "policy", broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    data = _data(tmp_path / "t.jsonl")
    with pytest.raises(SystemExit) as exc:
        main(
            ["score", "--policy", str(broken), "--reference", str(models / "reference"),
             "--in", str(data), "--out", str(tmp_path / "o.jsonl")]
        )  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "model.safetensors" in err
    assert "truncated" in err


def _scored_file(path, scores, success=(True, False)):
    trajs = [
        Trajectory.from_lines(
            "1+2=", "1+2=3\nAnswer: 3", id=str(i), group="g", success=ok, first_error=None
        ).with_extra(step_scores=list(s))
        for i, (s, ok) in enumerate(zip(scores, success, strict=True))
    ]
    return write_trajectories(path, trajs)


def test_best_of_n_out_directory_is_a_one_line_error(tmp_path, capsys):
    scored = _scored_file(tmp_path / "s.jsonl", [[0.1, 0.2], [0.3, -0.1]])
    with pytest.raises(SystemExit) as exc:
        main(["best-of-n", "--in", str(scored), "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "is a directory" in err


def test_every_reading_command_refuses_bad_files_in_one_line(tmp_path, capsys):
    good = _scored_file(tmp_path / "s.jsonl", [[0.1, 0.2], [0.3, -0.1]])
    line = good.read_text().splitlines()[0]
    (tmp_path / "trunc.jsonl").write_text(line + "\n" + line[:40])
    (tmp_path / "schema.jsonl").write_text(json.dumps({"id": 1, "messages": "x"}) + "\n")
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "dir.jsonl").mkdir()
    cases = {
        "trunc.jsonl": "line 2: truncated",
        "schema.jsonl": "line 1: field 'messages'",
        "empty.jsonl": "holds no trajectories",
        "dir.jsonl": "cannot read",
        "missing.jsonl": "no such file",
    }
    for command in ("best-of-n", "uq", "attribute"):
        for name, needle in cases.items():
            with pytest.raises(SystemExit) as exc:
                main([command, "--in", str(tmp_path / name)])
            assert exc.value.code == 2, (command, name)
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1, (command, name, err)
            assert needle in err, (command, name, err)


def test_uses_check_out_before_reading(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for command in ("best-of-n", "uq", "attribute"):
        # the input does not even exist: --out is checked first, so its error is the one shown
        with pytest.raises(SystemExit) as exc:
            main([command, "--in", str(tmp_path / "none.jsonl"), "--out", str(blocker / "o")])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert f"--out {blocker / 'o'}: {blocker} exists and is not a directory" in err


def test_score_checks_out_and_models_before_any_work(tmp_path, models, capsys):
    data = _data(tmp_path / "t.jsonl")
    argv = ["score", "--policy", str(models / "policy"), "--reference",
            str(models / "reference"), "--in", str(data)]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "--out" in capsys.readouterr().err
    argv[2] = str(data)  # a file where a model folder belongs
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err.strip()
    assert err == f"progress-advantage: error: --policy {data}: is a file, not a model directory"
    assert not (tmp_path / "o.jsonl").exists()


def test_train_policy_names_a_missing_reference(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train-policy", "--reference", str(tmp_path / "nope"), "--out", str(tmp_path / "p")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"progress-advantage: error: --reference {tmp_path / 'nope'}: no such directory"


def test_nan_step_scores_are_refused(tmp_path, capsys):
    scored = _scored_file(tmp_path / "s.jsonl", [[0.1, 0.2], [0.3, -0.1]])
    lines = scored.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["step_scores"][0] = float("nan")
    (tmp_path / "nan.jsonl").write_text(lines[0] + "\n" + json.dumps(rec) + "\n")
    for command in ("best-of-n", "uq", "attribute"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--in", str(tmp_path / "nan.jsonl")])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert "line 2" in err
        # core 0.3 refuses NaN while parsing the line; the field check is the second guard
        assert "NaN is not a number JSON allows" in err or "step_scores[0]" in err, err


def test_uq_says_auroc_is_undefined_with_one_outcome(tmp_path, capsys):
    scored = _scored_file(tmp_path / "s.jsonl", [[0.1, 0.2], [0.3, -0.1]], success=(True, True))
    with pytest.raises(SystemExit) as exc:
        main(["uq", "--in", str(scored)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "undefined" in err
    assert "all 2 labelled trajectories succeeded" in err


def test_attribute_rules_on_the_command_line(tmp_path, capsys):
    scored = _scored_file(tmp_path / "s.jsonl", [[0.5, 0.2], [-0.1, 0.4]], success=(False, False))
    assert main(["attribute", "--in", str(scored), "--out", str(tmp_path / "a.jsonl")]) == 0
    steps = [json.loads(x)["step"] for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert steps == [0, 0]  # min-cumulative: cumsums (0.5, 0.7) and (-0.1, 0.3)
    out = tmp_path / "b.jsonl"
    assert main(["attribute", "--in", str(scored), "--rule", "argmin", "--out", str(out)]) == 0
    assert [json.loads(x)["step"] for x in out.read_text().splitlines()] == [1, 0]


def test_train_policy_command_saves_a_loadable_policy(tmp_path, models):
    out = tmp_path / "policy"
    argv = ["train-policy", "--reference", str(models / "reference"), "--out", str(out),
            "--prompts-per-step", "2", "--num-generations", "2", "--min-steps", "1",
            "--max-steps", "1", "--window", "1", "--train-prompts", "4"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads((out / "ranks" / "rank0.json").read_text())
    assert record["world_size"] == 1
    assert record["steps"] == 1
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(out).config.vocab_size > 0


def test_train_policy_refuses_a_single_generation(tmp_path, models, capsys):
    argv = ["train-policy", "--reference", str(models / "reference"), "--out",
            str(tmp_path / "p"), "--num-generations", "1"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "leave-one-out" in capsys.readouterr().err


def test_best_of_n_ranks_huge_finite_step_scores_by_their_true_sum(tmp_path, capsys):
    """Issue #46: a float sum of 1e308 step scores was Infinity, so the trajectory whose scores
    sum to 1e308 beat the one summing to 1.5e308 (exit 0, wrong pick). fsum ranks them exactly."""
    trajs = [
        Trajectory.from_lines("p", "a\nb\nc", id=str(i), group="g", success=ok).with_extra(
            step_scores=s
        )
        for i, (s, ok) in enumerate([([1e308, 1e308, -1e308], False), ([1.5e308, 0.0, 0.0], True)])
    ]
    scored = write_trajectories(tmp_path / "s.jsonl", trajs)
    out = tmp_path / "b.jsonl"
    assert main(["best-of-n", "--in", str(scored), "--out", str(out)]) == 0
    (pick,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert pick["id"] == "1"
    assert pick["score"] == 1.5e308
    assert main(["best-of-n", "--in", str(scored), "--traj-agg", "mean"]) == 0


def test_a_step_score_sum_beyond_the_float_range_is_one_line(tmp_path, capsys):
    scored = _scored_file(tmp_path / "s.jsonl", [[0.1, 0.2], [1e308, 1e308]])
    out = tmp_path / "b.jsonl"
    for command in ("best-of-n", "uq"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--in", str(scored), "--out", str(out)])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert f"{scored}: line 2: the sum of the step scores is beyond the float range" in err
        assert not out.exists()


def test_infinite_and_overflowing_step_scores_are_refused_at_the_input(tmp_path, capsys):
    """JSON's Infinity and 1e999 (an overflowing literal) are refused before any aggregation."""
    scored = _scored_file(tmp_path / "s.jsonl", [[0.1, 0.2], [0.3, -0.1]])
    lines = scored.read_text().splitlines()
    cases = {"Infinity": "infinities are refused", "1e999": "1e999 overflows a 64-bit float"}
    for literal, needle in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text(lines[0] + "\n" + lines[1].replace("0.3", literal, 1) + "\n")
        with pytest.raises(SystemExit) as exc:
            main(["best-of-n", "--in", str(bad)])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert f"{bad}: line 2: " in err
        assert needle in err


@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3", "mistral", "gpt2"])
def test_train_lora_policy_then_score_on_every_zoo_checkpoint(tmp_path, name, capsys):
    """A user's own model from the command line: train-policy with LoRA and gradient
    accumulation on each zoo checkpoint (GPT-2 without chat template or pad token, Mistral
    without pad token), then `score --model ADAPTER --trajectories FILE` with the adapter
    switched off as the reference."""
    from paperstack.testing import zoo

    out = tmp_path / "policy"
    argv = ["train-policy", "--model", str(zoo.checkpoint(name)), "--out", str(out),
            "--prompts-per-step", "2", "--num-generations", "2", "--min-steps", "1",
            "--max-steps", "1", "--window", "1", "--train-prompts", "4",
            "--max-completion-length", "8", "--lora-r", "4",
            "--gradient-accumulation-steps", "2",
            *(["--bf16"] if name == "qwen2" else [])]  # fmt: skip
    assert main(argv) == 0
    assert (out / "adapter_config.json").is_file()
    data = _data(tmp_path / "t.jsonl")
    scored = tmp_path / "s.jsonl"
    argv = ["score", "--model", str(out), "--trajectories", str(data), "--out", str(scored)]
    assert main(argv) == 0
    rec = [json.loads(x) for x in scored.read_text().splitlines()]
    assert [len(r["step_scores"]) for r in rec] == [2, 2, 2]


def test_train_policy_refuses_accumulation_that_does_not_divide_the_batch(tmp_path, models, capsys):
    argv = ["train-policy", "--model", str(models / "reference"), "--out", str(tmp_path / "p"),
            "--prompts-per-step", "3", "--num-generations", "2",
            "--gradient-accumulation-steps", "4"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "gradient accumulation" in err
    assert len(err.strip().splitlines()) == 1


def test_score_names_the_line_of_a_trajectory_it_cannot_render(tmp_path, models, capsys):
    """A template that rewrites a message (here: upper-cases it) cannot be mapped back to
    character spans: one line naming the file and line, exit 2."""
    folder = tmp_path / "policy"
    shutil.copytree(models / "policy", folder)
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "{% for m in messages %}{{ m['content'] | upper }}\n{% endfor %}"
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    for extra in folder.glob("chat_template.*"):
        extra.unlink()
    data = tmp_path / "t.jsonl"
    write_trajectories(data, [Trajectory.from_lines("what", "one\ntwo", id="x")])
    argv = ["score", "--model", str(folder), "--reference", str(models / "reference"),
            "--trajectories", str(data), "--out", str(tmp_path / "s.jsonl")]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert f"{data}: line 1:" in err
    assert "does not appear" in err
    assert len(err.splitlines()) == 1
