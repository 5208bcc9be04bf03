"""``probe audit``: audit a served agent (any OpenAI-compatible server) on a domain folder.

Each auditor plays ``episodes`` scenarios of the domain (drawn from the folder's database by
the base domain's scenario generator) against :class:`~probe_audit.openai_target.ToolsTarget`;
its tool calls run on a copy of the folder's database per episode, and the checkers (the
policy as code) read the tool trace and the database diff, as in the demo. A served target has
no planted ground truth, so what the audit reports is what the checkers found: distinct
violations per episode with an interval over episodes, each violation with its episode, turn
and evidence (the tool call id, whose arguments and result are in the episode ledger), and the
cost card of every request.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from probe_audit.errors import ProbeError
from probe_audit.game import Episode, EpisodeLedger, GameConfig, play
from probe_audit.policy import check_episode

__all__ = ["AUDITOR_NAMES", "AuditorResult", "make_auditors", "run_audit", "write_audit_report"]

#: What ``--auditors`` accepts besides the five strategy names.
AUDITOR_NAMES = ("scripted", "random", "zero-shot")


@dataclasses.dataclass
class AuditorResult:
    """What one auditor found against the served target."""

    name: str
    episodes: int
    violations: list[dict[str, Any]]
    per_episode: list[int]
    target_errors: int
    seconds: float

    def rules(self) -> list[str]:
        return sorted({v["rule_id"] for v in self.violations})

    def summary(self) -> dict[str, Any]:
        from paperstack.stats import mean_ci

        mean, lo, hi = _mean_ci(self.per_episode, mean_ci)
        return {
            "auditor": self.name,
            "episodes": self.episodes,
            "violations": len(self.violations),
            "violations_per_episode": mean,
            "ci95": [lo, hi],
            "distinct_rules": self.rules(),
            "categories": sorted({v["category"] for v in self.violations}),
            "target_errors": self.target_errors,
            "seconds": round(self.seconds, 2),
        }


def _mean_ci(values: Sequence[int], mean_ci: Callable[..., Any]) -> tuple[float, float, float]:
    xs = [float(v) for v in values]
    if len(xs) < 2:
        m = xs[0] if xs else 0.0
        return m, m, m
    mean, (lo, hi) = mean_ci(xs)
    return mean, lo, hi


def make_auditors(spec: str, seed: int, *, pretrain_steps: int = 300) -> list[Any]:
    """``--auditors``: a comma list of strategy names, ``scripted`` (all five), ``random``
    (random templates) and ``zero-shot`` (the toy auditor model, pre-trained and cached)."""
    from probe_audit.strategies import STRATEGIES, RandomTemplateAuditor, ScriptedAuditor

    out: list[Any] = []
    for raw in spec.split(","):
        name = raw.strip()
        if name == "scripted":
            out.extend(ScriptedAuditor(s, seed) for s in STRATEGIES)
        elif name in STRATEGIES:
            out.append(ScriptedAuditor(name, seed))
        elif name == "random":
            out.append(RandomTemplateAuditor(seed))
        elif name == "zero-shot":
            from probe_audit.auditors import ModelAuditor
            from probe_audit.toy import pretrained_auditor

            model, tokenizer = pretrained_auditor(pretrain_steps, progress=False)
            out.append(ModelAuditor(model, tokenizer, seed=seed, name="zero-shot"))
        else:
            raise ProbeError(
                f"--auditors {spec}: unknown auditor {name!r}; use "
                f"{', '.join((*AUDITOR_NAMES, *STRATEGIES))}"
            )
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise ProbeError(f"--auditors {spec}: an auditor is named twice")
    return out


def run_audit(
    target: Any,
    loaded: Any,
    auditors: Sequence[Any],
    *,
    episodes: int,
    seed: int,
    max_turns: int,
    ledger_path: Path,
    max_tool_calls: int = 4,
    progress: Callable[[str], None] | None = None,
) -> list[AuditorResult]:
    """Play ``episodes`` scenarios of the folder domain ``loaded`` per auditor against
    ``target``, every episode into the ledger at ``ledger_path`` as it ends (crash-safe)."""
    domain = loaded.domain
    db = loaded.db
    scenarios = domain.make_scenarios(db, episodes, seed)
    results = []
    with EpisodeLedger(ledger_path) as ledger:
        for auditor in auditors:
            if hasattr(auditor, "reset"):
                auditor.reset()
            found: list[dict[str, Any]] = []
            per: list[int] = []

            def check(ep: Episode, _found: list[dict[str, Any]] = found) -> None:
                ep.violations = check_episode(ep, domain)
                for v in ep.violations:
                    _found.append({"episode": ep.id, **v.to_json()})

            started = time.perf_counter()
            played = play(
                domain, scenarios, auditor, target, db,
                GameConfig(max_turns=max_turns, max_tool_calls=max_tool_calls,
                           on_target_error="record"),
                episode_ids=[f"{auditor.name}-{k}" for k in range(len(scenarios))],
                checker=check, on_episode=ledger,
            )  # fmt: skip
            per = [len(ep.violations) for ep in played]
            results.append(
                AuditorResult(
                    auditor.name, len(played), found, per,
                    sum(ep.target_errors for ep in played), time.perf_counter() - started,
                )
            )  # fmt: skip
            if progress is not None:
                progress(f"{auditor.name}: {len(found)} violation(s) in {len(played)} episodes")
    return results


def write_audit_report(
    out: Path,
    results: Sequence[AuditorResult],
    *,
    target: Any,
    loaded: Any,
    shown_url: str,
    config: Mapping[str, Any],
    seconds: float,
    note: str = "",
) -> dict[str, Any]:
    """``audit.json`` and ``report.md`` in ``out``; returns the JSON."""
    stats = target.stats.to_json()
    data = {
        "target": {"base_url": shown_url, "model": target.chat.model, "mode": target.mode},
        "domain": {"path": str(loaded.path), "base": loaded.base,
                   "tools": [t["function"]["name"] for t in loaded.tool_schemas]},
        "tool_calls": stats,
        "auditors": [r.summary() for r in results],
        "violations": {r.name: r.violations for r in results},
        "config": dict(config),
        "seconds": round(seconds, 2),
    }  # fmt: skip
    (out / "audit.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    calls = stats["native_calls"] + stats["text_calls"]
    if stats["tools_refused"]:
        how = (
            "The server REFUSED the tools API (`tools=[...]`): "
            f"{stats['tools_refused']}. Every later request went without it, so tool calls "
            "travelled as text (the fallback)."
        )
    elif stats["text_calls"] and not stats["native_calls"]:
        how = (
            "The server accepted `tools=[...]` but returned no native `tool_calls`: every tool "
            "call the target made was read from its text (the fallback), so this audit did "
            "NOT exercise the server's native tool calling."
        )
    elif stats["text_calls"]:
        how = "Some tool calls came back natively, some as text (the fallback); counts below."
    elif calls:
        how = "Every tool call came back natively through the tools API (`tool_calls`)."
    elif stats["malformed"]:
        how = (
            f"The target made no usable tool call: {stats['malformed']} answer(s) opened a tool "
            "call that neither the tools API nor the text format could read (each went back to "
            "it as an error), the rest were messages. Nothing it did touched the database, so "
            "the checkers could only find violations in its words."
        )
    else:
        how = (
            "The target made no tool call at all (neither native nor as text): nothing it did "
            "touched the database, so the checkers could only find violations in its words."
        )
    lines = [
        f"# probe audit: {target.chat.model} on {loaded.base} ({loaded.path})",
        "",
        f"Target `{target.chat.model}` at {shown_url}, tool-call mode `{target.mode}`; domain "
        f"folder `{loaded.path}` (base `{loaded.base}`, {len(loaded.tool_schemas)} tools). "
        f"{config.get('episodes')} scenario(s) per auditor, at most {config.get('max_turns')} "
        f"user turns each, scenario seed {config.get('seed')}; {seconds:.0f} s.",
        "",
        f"**How tool calls travelled.** {how}",
        "",
        "| requests | native tool calls | text tool calls (fallback) | messages | "
        "unreadable calls | parallel calls not run |",
        "|---|---|---|---|---|---|",
        f"| {stats['requests']} | {stats['native_calls']} | {stats['text_calls']} | "
        f"{stats['messages']} | {stats['malformed']} | {stats['extra_native_calls']} |",
        "",
        "| auditor | episodes | violations / episode [95% CI over episodes] | distinct rules | "
        "categories | broken target calls |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r.summary()
        lines.append(
            f"| {r.name} | {r.episodes} | {s['violations_per_episode']:.3g} "
            f"[{s['ci95'][0]:.3g}, {s['ci95'][1]:.3g}] | {', '.join(s['distinct_rules']) or '-'} "
            f"| {', '.join(s['categories']) or '-'} | {r.target_errors} |"
        )
    lines += [
        "",
        "Violations (evidence: the tool call id in `episodes.jsonl`, or quoted text):",
        "",
    ]
    any_found = False
    for r in results:
        for v in r.violations:
            any_found = True
            lines.append(
                f"- {v['episode']} turn {v['turn']}: `{v['rule_id']}` ({v['category']}) "
                f"{v.get('detail') or ''} [evidence {v['evidence']}]"
            )
    if not any_found:
        lines.append("- none")
    lines += [
        "",
        "No planted ground truth exists for a served target: a violation is what the policy as "
        "code found in the tool trace and database diff, to be read in the episode ledger. The "
        "costs of every request are in `cost_card.json`.",
    ]
    if note:
        lines += ["", note]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return data
