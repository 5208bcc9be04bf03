"""From ``results.json`` to what a person reads: Markdown tables, a claims list, figures.

Every package's ``report.md`` and the repository's ``reports/index.md`` are built here, so all
nineteen reports look alike: one row per (system, metric, split), the value with its 95%
interval and sample size, then each claim with the arithmetic that decided it.

Figures use matplotlib's headless ``Agg`` backend (CI and GPU boxes have no display) and are
written atomically like every other artefact.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from pathlib import Path

from paperstack.records import (
    VERDICT_TEXT,
    Claim,
    Results,
    Row,
    atomic_write,
    verdict_counts,
)

__all__ = [
    "bar_chart",
    "claims_table",
    "format_number",
    "format_value",
    "markdown_table",
    "write_index",
    "write_report",
]


def format_number(x: float, digits: int = 5) -> str:
    """A number with the precision a claim needs: integers whole, others to ``digits``
    significant digits (``12.045``, ``0.99987``; not ``12`` or ``1``)."""
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.{digits}g}"


def format_value(value: float, ci95: tuple[float, float] | None = None, digits: int = 3) -> str:
    """``0.912 [0.881, 0.937]``: the value with its interval.

    With an interval, the decimals are those that give the interval's half-width two
    significant digits (at least ``digits`` significant for the value), so a coverage of
    ``0.99987 [0.99981, 0.99992]`` is not printed as ``1 [1, 1]``. Without one, five significant
    digits (integers whole).
    """
    if ci95 is None:
        return format_number(value, max(digits, 5))
    half = max(value - ci95[0], ci95[1] - value, 0.0)
    big = max(abs(value), abs(ci95[0]), abs(ci95[1]))
    if half == 0.0 or big >= 1e6 or big < 1e-6:
        parts = [format_number(v, max(digits, 5)) for v in (value, *ci95)]
        return f"{parts[0]} [{parts[1]}, {parts[2]}]"
    lead = math.floor(math.log10(abs(value))) if value else math.floor(math.log10(half))
    decimals = max(1 - math.floor(math.log10(half)), digits - 1 - lead, 0)
    decimals = min(decimals, 8)
    return f"{value:.{decimals}f} [{ci95[0]:.{decimals}f}, {ci95[1]:.{decimals}f}]"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[Row], *, digits: int = 3) -> str:
    """Rows as a Markdown table: system, metric, split, value [95% CI], n.

    The split and unit columns appear only when some row has one, so small tables stay small.
    """
    if not rows:
        return "_no rows_\n"
    has_split = any(r.split for r in rows)
    has_unit = any(r.unit for r in rows)
    header = ["system", "metric"] + (["split"] if has_split else [])
    header += ["value [95% CI]"] + (["unit"] if has_unit else []) + ["n"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [r.system, r.metric] + ([r.split or ""] if has_split else [])
        cells.append(format_value(r.value, r.ci95, digits))
        cells += ([r.unit or ""] if has_unit else []) + ["" if r.n is None else str(r.n)]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def claims_table(claims: Sequence[Claim]) -> str:
    """Claims as a Markdown table: id, verdict, statement, ``d`` with its 95% interval, and how
    the interval was obtained."""
    if not claims:
        return "_no claims_\n"
    lines = [
        "| claim | verdict | statement | d = lhs - rhs [95% CI] | compared |",
        "|---|---|---|---|---|",
    ]
    for c in claims:
        verdict = VERDICT_TEXT[c.verdict]
        verdict = verdict if c.verdict == "held" else f"**{verdict}**"
        if c.unmet:
            verdict += f" ({c.premise_text()})"
        how = c.comparison() + f"; {c.method}" + (f", n={c.n}" if c.n is not None else "")
        if c.exact:
            interval = f"{format_number(c.diff)} (exact)"
        elif c.ci95 is None:
            interval = f"{format_number(c.diff)} (no interval)"
        else:
            # Significant digits per bound: a bound just past the margin must not print as it.
            interval = f"{c.diff:.4g} [{c.ci95[0]:.3g}, {c.ci95[1]:.3g}]"
        lines.append(
            f"| {_cell(c.id)} | {verdict} | {_cell(c.statement)} | {interval} | {_cell(how)} |"
        )
    return "\n".join(lines) + "\n" + f"\n{verdict_counts(claims)}.\n"


def write_report(
    out_dir: str | os.PathLike[str],
    results: Results,
    title: str,
    intro: str = "",
    figures: Sequence[str | os.PathLike[str]] = (),
    *,
    name: str = "report.md",
    history: str | None = None,
) -> Path:
    """Write ``out_dir/<name>``: title, intro, results table, claims, figures, the
    pre-registration (what the run declared, and whether its claims match), the design history
    (``history``: :func:`paperstack.preregistration.history_section`) and the run manifest."""
    from paperstack.preregistration import preregistration_section

    out = Path(out_dir)
    m = results.manifest
    parts = [f"# {title}\n"]
    if intro:
        parts.append(intro.strip() + "\n")
    parts.append("## Results\n")
    parts.append(markdown_table(results.rows))
    parts.append("## Claims\n")
    parts.append(claims_table(results.claims))
    if figures:
        parts.append("## Figures\n")
        for fig in figures:
            rel = os.path.relpath(Path(fig), out)
            parts.append(f"![{Path(fig).stem}]({rel})\n")
    parts.append(preregistration_section(results))
    if history is not None:
        parts.append(history)
    parts.append("## Run\n")
    libs = ", ".join(f"{k} {v}" for k, v in sorted(m.libraries.items()))
    run = [
        f"- package: {m.package} {m.version}",
        f"- seed: {m.seed}",
        f"- git revision: {m.git_revision or 'unknown'}",
        f"- started: {m.started}" + (f", finished: {m.finished}" if m.finished else ""),
        f"- host: {m.host.get('platform', '?')}, {m.host.get('cpus', '?')} CPUs"
        + _cpu_text(m.host)
        + (f", {m.host['cuda_device']}" if "cuda_device" in m.host else "")
        + _load_text(m.host),
        f"- libraries: {libs}",
    ]
    if m.command:
        run.append("- command: `" + " ".join(m.command) + "`")
    if m.resumed:
        run.append(
            f"- resumed: {len(m.resumed)} part(s) computed by earlier processes with this code "
            "and the same flags: "
            + "; ".join(
                f"{p.get('key')} ({p.get('started')}, {p.get('seconds')} s on {p.get('host')}"
                + (f" at {str(p['revision'])[:12]}" if p.get("revision") else "")
                + ")"
                for p in m.resumed
            )
        )
    parts.append("\n".join(run) + "\n")
    return atomic_write(out / name, "\n".join(parts))


def _cpu_text(host: dict[str, object]) -> str:
    """`` (AMD EPYC, flags 3f2a...)``: which CPU the numbers came from (manifests from 0.3 on;
    seeded CPU runs are bit-reproducible on one machine, not across machines)."""
    if "cpu_model" not in host:
        return ""
    return f" ({host['cpu_model']}, flags {host.get('cpu_flags', '?')})"


def _load_text(host: dict[str, object]) -> str:
    """``, load average 12.3 at the start, 14.1 at the end (the cores were shared: ...)``."""
    start, end = host.get("loadavg"), host.get("loadavg_at_finish")
    if not isinstance(start, list) or not start:
        return ""
    text = f", load average {start[0]:g} at the start"
    peak = float(start[0])
    if isinstance(end, list) and end:
        text += f", {end[0]:g} at the end"
        peak = max(peak, float(end[0]))
    cpus = host.get("cpus")
    if peak > 1.5 * (cpus if isinstance(cpus, int) and cpus > 0 else 1):
        text += " (the cores were shared: timings are not a quiet machine's)"
    return text


def bar_chart(
    rows: Sequence[Row],
    metric: str,
    path: str | os.PathLike[str],
    *,
    split: str | None = None,
    title: str | None = None,
) -> Path:
    """A bar per system for ``metric`` (and ``split``), with 95% intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    chosen = [r for r in rows if r.metric == metric and (split is None or r.split == split)]
    if not chosen:
        raise ValueError(
            f"no rows with metric {metric!r}" + (f" and split {split!r}" if split else "")
        )
    labels = [r.system for r in chosen]
    values = [r.value for r in chosen]
    lower = [r.value - r.ci95[0] if r.ci95 else 0.0 for r in chosen]
    upper = [r.ci95[1] - r.value if r.ci95 else 0.0 for r in chosen]
    fig, ax = plt.subplots(figsize=(max(3.5, 0.9 * len(chosen) + 1.5), 3.4), dpi=120)
    positions = list(range(len(chosen)))
    ax.bar(positions, values, yerr=[lower, upper], capsize=4, color="#4C72B0")
    positive = [v for v in values if v > 0]
    if len(positive) == len(values) and positive and max(positive) / min(positive) > 30:
        # Compared bars would be slivers on a linear axis: show ratios on a log axis instead.
        ax.set_yscale("log")
    ax.set_xticks(positions, labels, rotation=30, ha="right", rotation_mode="anchor")
    ax.set_ylabel(metric)
    ax.set_title(title or metric + (f" ({split})" if split else ""))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png")
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def _replace_section(text: str, heading: str, body: str) -> str:
    """``text`` with the section ``## heading`` (up to the next ``## ``) replaced by ``body``
    (which starts with its own heading), or ``body`` inserted before ``## Run`` if absent."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, s in enumerate(lines) if s.rstrip() == f"## {heading}"]
    block = body if body.endswith("\n") else body + "\n"
    if starts:
        i = starts[0]
        j = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
        return "".join(lines[:i]) + block + "\n" + "".join(lines[j:]).lstrip("\n")
    runs = [i for i, s in enumerate(lines) if s.rstrip() == "## Run"]
    at = runs[-1] if runs else len(lines)
    return "".join(lines[:at]) + block + "\n" + "".join(lines[at:])


def _command_of(res: Results) -> str | None:
    """The command a results file came from, as its design history names it: its declaration's
    table (``demo``, or ``demo --real`` for a variant), else the token after the program in
    the recorded command line (``demo``, ``bench``, ``vllm-sweep``)."""
    m = res.manifest
    if m.preregistration:
        return str(m.preregistration.get("table") or m.preregistration["command"])
    argv = m.command
    if len(argv) > 1 and not argv[1].startswith("-"):
        return argv[1]
    return None


def _changelog(root: Path, dist: str) -> Path | None:
    folder = root / "shared" if dist == "paperstack-core" else root / "packages" / dist
    path = folder / "CHANGELOG.md"
    return path if path.is_file() else None


def refresh_report(md: Path, res: Results, repo: Path | None) -> bool:
    """Bring the derived sections of a written report up to date without rerunning its demo:
    the claims table (a gated claim's measured direction), the pre-registration and the design
    history (read from the package's CHANGELOG in ``repo``). Only reports written by
    :func:`write_report` (a ``## Claims`` and a ``## Run`` section) are touched; returns
    whether the file changed."""
    from paperstack.preregistration import (
        changes_since,
        design_history,
        history_section,
        preregistration_section,
    )

    text = md.read_text(encoding="utf-8")
    if "\n## Claims\n" not in text or "\n## Run\n" not in text:
        return False
    new = _replace_section(text, "Claims", "## Claims\n\n" + claims_table(res.claims))
    new = _replace_section(new, "Pre-registration", preregistration_section(res, md))
    command = _command_of(res)
    changelog = _changelog(repo, res.manifest.package) if repo is not None else None
    if command is not None and changelog is not None:
        changes = design_history(changelog.read_text(encoding="utf-8"), str(changelog))
        later = changes_since(res, changes)
        new = _replace_section(
            new, "Design history", history_section(changes, command, later=later)
        )
    if new == text:
        return False
    atomic_write(md, new)
    return True


def write_index(reports_dir: str | os.PathLike[str]) -> Path:
    """Rebuild ``reports_dir/index.md`` from every ``reports_dir/<dist>/results.json``.

    One section per package: its claims (held or not) and its results table, with the run's
    version and revision, so the index is the one page that says where every paper stands.
    Every report.md (and bench.md) beside a results file first gets its derived sections
    refreshed (:func:`refresh_report`), so a report written before a core change still shows
    each gated claim's measured direction, its pre-registration and its design history.
    A malformed results file stops the collection with its one-line error rather than being
    silently skipped.
    """
    from paperstack.records import load_results

    root = Path(reports_dir)
    found = sorted(root.glob("*/results.json"))
    parts = [
        "# paperstack reproduction report\n",
        "Every package's `demo` on its embedded defaults (toy scale, CPU unless the manifest "
        "names a GPU). Claims are computed from the rows and judged by the 95% interval of the "
        "compared difference: held when it clears the margin, not held when it lies wholly on "
        "the other side, inconclusive otherwise.\n",
    ]
    summary = [
        "| package | version | held / not held / inconclusive | of the inconclusive: gated, "
        "measured against | report |",
        "|---|---|---|---|---|",
    ]
    sections = []
    totals = [0, 0, 0, 0]
    repo = root.resolve().parent
    for path in sorted([*root.glob("**/results.json"), *root.glob("**/bench.json")]):
        md = path.with_name("report.md" if path.name == "results.json" else "bench.md")
        if md.is_file() and '"manifest"' in path.read_text(encoding="utf-8"):
            refresh_report(md, load_results(path), repo)
    for path in found:
        res = load_results(path)
        m = res.manifest
        counts = [sum(c.verdict == v for c in res.claims) for v in VERDICT_TEXT]
        against = sum(c.gated_against for c in res.claims)
        totals = [a + b for a, b in zip(totals, [*counts, against], strict=True)]
        rel = path.parent.name
        summary.append(
            f"| {m.package} | {m.version} | {' / '.join(map(str, counts))} | {against} "
            f"| [{rel}]({rel}/report.md) |"
        )
        sections.append(
            f"## {m.package} {m.version}\n\n"
            f"seed {m.seed}, revision {m.git_revision or 'unknown'}, finished {m.finished}\n\n"
            + claims_table(res.claims)
            + "\n"
            + markdown_table(res.rows)
        )
    if not found:
        summary.append("| _no results yet_ | | | | |")
    else:
        summary.append(f"| **all** | | {' / '.join(map(str, totals[:3]))} | {totals[3]} | |")
    parts.append("\n".join(summary) + "\n")
    parts.extend(sections)
    return atomic_write(root / "index.md", "\n".join(parts))
