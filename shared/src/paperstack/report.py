"""From ``results.json`` to what a person reads: Markdown tables, a claims list, figures.

Every package's ``report.md`` and the repository's ``reports/index.md`` are built here, so all
nineteen reports look alike: one row per (system, metric, split), the value with its 95%
interval and sample size, then each claim with the arithmetic that decided it.

Figures use matplotlib's headless ``Agg`` backend (CI and GPU boxes have no display) and are
written atomically like every other artefact.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path

from paperstack.records import Claim, Results, Row, atomic_write

__all__ = [
    "bar_chart",
    "claims_table",
    "format_value",
    "markdown_table",
    "write_index",
    "write_report",
]


def format_value(value: float, ci95: tuple[float, float] | None = None, digits: int = 3) -> str:
    """``0.912 [0.881, 0.937]``: the value with its interval, ``digits`` significant digits."""
    text = f"{value:.{digits}g}"
    if ci95 is not None:
        text += f" [{ci95[0]:.{digits}g}, {ci95[1]:.{digits}g}]"
    return text


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
    """Claims as a Markdown table: id, held or not, the statement and the arithmetic behind it."""
    if not claims:
        return "_no claims_\n"
    lines = ["| claim | held | statement | computed from |", "|---|---|---|---|"]
    for c in claims:
        verdict = "yes" if c.held else "**no**"
        lines.append(
            f"| {_cell(c.id)} | {verdict} | {_cell(c.statement)} | {_cell(c.describe())} |"
        )
    return "\n".join(lines) + "\n"


def write_report(
    out_dir: str | os.PathLike[str],
    results: Results,
    title: str,
    intro: str = "",
    figures: Sequence[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``out_dir/report.md``: title, intro, results table, claims, figures, run manifest."""
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
    parts.append("## Run\n")
    libs = ", ".join(f"{k} {v}" for k, v in sorted(m.libraries.items()))
    run = [
        f"- package: {m.package} {m.version}",
        f"- seed: {m.seed}",
        f"- git revision: {m.git_revision or 'unknown'}",
        f"- started: {m.started}" + (f", finished: {m.finished}" if m.finished else ""),
        f"- host: {m.host.get('platform', '?')}, {m.host.get('cpus', '?')} CPUs"
        + (f", {m.host['cuda_device']}" if "cuda_device" in m.host else ""),
        f"- libraries: {libs}",
    ]
    if m.command:
        run.append("- command: `" + " ".join(m.command) + "`")
    parts.append("\n".join(run) + "\n")
    return atomic_write(out / "report.md", "\n".join(parts))


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
    fig, ax = plt.subplots(figsize=(max(3.0, 0.9 * len(chosen) + 1.5), 3.2), dpi=120)
    ax.bar(labels, values, yerr=[lower, upper], capsize=4, color="#4C72B0")
    ax.set_ylabel(metric)
    ax.set_title(title or metric + (f" ({split})" if split else ""))
    ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png")
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def write_index(reports_dir: str | os.PathLike[str]) -> Path:
    """Rebuild ``reports_dir/index.md`` from every ``reports_dir/<dist>/results.json``.

    One section per package: its claims (held or not) and its results table, with the run's
    version and revision, so the index is the one page that says where every paper stands.
    A malformed results file stops the collection with its one-line error rather than being
    silently skipped.
    """
    from paperstack.records import load_results

    root = Path(reports_dir)
    found = sorted(root.glob("*/results.json"))
    parts = [
        "# paperstack reproduction report\n",
        "Every package's `demo` on its embedded defaults (toy scale, CPU unless the manifest "
        "names a GPU). Claims are computed from the rows; a claim that did not hold says so.\n",
    ]
    summary = ["| package | version | claims held | report |", "|---|---|---|---|"]
    sections = []
    for path in found:
        res = load_results(path)
        m = res.manifest
        held = sum(c.held for c in res.claims)
        rel = path.parent.name
        summary.append(
            f"| {m.package} | {m.version} | {held}/{len(res.claims)} | [{rel}]({rel}/report.md) |"
        )
        sections.append(
            f"## {m.package} {m.version}\n\n"
            f"seed {m.seed}, revision {m.git_revision or 'unknown'}, finished {m.finished}\n\n"
            + claims_table(res.claims)
            + "\n"
            + markdown_table(res.rows)
        )
    if not found:
        summary.append("| _no results yet_ | | | |")
    parts.append("\n".join(summary) + "\n")
    parts.extend(sections)
    return atomic_write(root / "index.md", "\n".join(parts))
