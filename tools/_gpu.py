"""The GPU sweep's data and the wheelhouse checker (issue #47), shared by tools/gpu-sweep,
noxfile.py's ``gpu-wheelhouse`` session and tools/tests.

Why a checker: the lent GPU machine has no network, so ``.whl/`` is installed there with
``pip install --no-deps --no-index``, and pip then resolves nothing. A wheel whose requirement
is met neither by another wheel in ``.whl/`` nor by the machine's image would fail only there,
at import time, in the few minutes a GPU is at hand. So every wheel's ``Requires-Dist`` (with
its markers evaluated for CPython 3.12 on Linux x86_64, and the extras that other wheels ask of
it) is checked here against the wheels and the image's package list in tools/gpu-sweep.toml;
on the machine itself, the sweep runs the same check against the installed distributions.

    python3 tools/_gpu.py check [--wheels .whl]       # against tools/gpu-sweep.toml's image
    python3 tools/_gpu.py size [--wheels .whl]        # what one device call would carry

Needs ``packaging`` (pip's, pytest's; the GPU image has it) for requirement parsing.
"""

from __future__ import annotations

import argparse
import dataclasses
import email.parser
import importlib.metadata
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tools" / "gpu-sweep.toml"
WHEELS = ROOT / ".whl"
CORE_DIST = "paperstack-core"
#: What one device call carries at most: the working tree plus the carried paths (README "Limits").
CARRY_LIMIT = 64 * 2**20
#: pip's platform tags for the machine (manylinux needs each N named exactly).
PLATFORMS = (
    "manylinux_2_35_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
#: Markers as the GPU machine evaluates them (CPython 3.12, Linux x86_64).
MARKER_ENV = {
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}


class GpuError(Exception):
    """The sweep or the wheelhouse cannot go on; the message is one line a person can act on."""


def canonical(name: str) -> str:
    """PEP 503 name: ``Typing_Inspection`` and ``typing-inspection`` are one distribution."""
    return "-".join(name.replace("_", "-").replace(".", "-").lower().split("-"))


@dataclasses.dataclass(frozen=True)
class Step:
    dist: str
    budget_s: int
    mandatory: bool

    @property
    def script(self) -> str:
        return f"packages/{self.dist}/benchmarks/gpu.sh"


@dataclasses.dataclass(frozen=True)
class SweepData:
    limit_s: int
    budget_s: int
    setup_s: int
    steps: tuple[Step, ...]
    image: dict[str, str | None]  # canonical name -> version (None: present, not recorded)
    wheels: dict[str, str]  # canonical name -> version .whl/ carries
    waived: dict[str, str]  # canonical name -> why


def load(path: Path = DATA) -> SweepData:
    """tools/gpu-sweep.toml, checked: one line naming the field on anything malformed."""
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GpuError(f"{path}: cannot read: {exc}") from None
    try:
        sweep = raw["sweep"]
        steps = tuple(
            Step(str(s["dist"]), int(s["budget_s"]), bool(s.get("mandatory", False)))
            for s in raw["step"]
        )
        data = SweepData(
            limit_s=int(sweep["limit_s"]),
            budget_s=int(sweep["budget_s"]),
            setup_s=int(sweep["setup_s"]),
            steps=steps,
            image={
                canonical(k): (None if v == "*" else str(v))
                for k, v in raw["image"]["packages"].items()
            },
            wheels={canonical(k): str(v) for k, v in raw["wheels"].items()},
            waived={canonical(k): str(v) for k, v in raw.get("waived", {}).items()},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise GpuError(f"{path}: missing or malformed field {exc}") from None
    if len({s.dist for s in steps}) != len(steps):
        raise GpuError(f"{path}: a step is listed twice")
    if any(s.budget_s <= 0 for s in steps) or not 0 < data.budget_s <= data.limit_s:
        raise GpuError(f"{path}: budgets must be positive and budget_s <= limit_s")
    return data


# --------------------------------------------------------------------------- budget arithmetic


def mandatory_s(data: SweepData) -> int:
    """Setup plus every mandatory step at its full budget: must fit in ``budget_s``."""
    return data.setup_s + sum(s.budget_s for s in data.steps if s.mandatory)


def fits(step: Step, elapsed_s: float, data: SweepData) -> bool:
    """The skip rule: a step starts only if its whole budget fits in what is left."""
    return step.budget_s <= data.budget_s - elapsed_s


def worst_case_plan(data: SweepData, steps: Iterable[Step]) -> list[tuple[Step, float, bool]]:
    """(step, start second, runs?) when setup and every step take their whole budget."""
    t = float(data.setup_s)
    plan = []
    for step in steps:
        runs = fits(step, t, data)
        plan.append((step, t, runs))
        if runs:
            t += step.budget_s
    return plan


# --------------------------------------------------------------------------- the checker


@dataclasses.dataclass(frozen=True)
class Wheel:
    name: str  # canonical
    version: str
    requires: tuple[str, ...]
    path: Path


def read_wheel(path: Path) -> Wheel:
    """Name, version and Requires-Dist from a wheel's METADATA."""
    try:
        with zipfile.ZipFile(path) as zf:
            meta = next(
                (
                    n
                    for n in zf.namelist()
                    if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
                ),
                None,
            )
            if meta is None:
                raise GpuError(f"{path.name}: no .dist-info/METADATA in the wheel")
            msg = email.parser.Parser().parsestr(zf.read(meta).decode("utf-8"))
    except (OSError, zipfile.BadZipFile) as exc:
        raise GpuError(f"{path}: not a readable wheel: {exc}") from None
    if not msg["Name"] or not msg["Version"]:
        raise GpuError(f"{path.name}: METADATA has no Name or Version")
    return Wheel(
        canonical(msg["Name"]), msg["Version"], tuple(msg.get_all("Requires-Dist") or ()), path
    )


def read_wheels(folder: Path) -> dict[str, Wheel]:
    """Every wheel in ``folder`` by canonical name; two versions of one name are an error (one
    ``pip install --no-deps`` of both stops the whole install)."""
    found: dict[str, Wheel] = {}
    for path in sorted(folder.glob("*.whl")):
        wheel = read_wheel(path)
        if wheel.name in found:
            raise GpuError(
                f"{folder}: two wheels of {wheel.name} ({found[wheel.name].path.name}, "
                f"{path.name}); keep one"
            )
        found[wheel.name] = wheel
    return found


@dataclasses.dataclass
class Report:
    unmet: list[str] = dataclasses.field(default_factory=list)
    unverified: list[str] = dataclasses.field(default_factory=list)
    checked: int = 0


def check(
    wheels: Mapping[str, Wheel],
    image: Mapping[str, str | None],
    waived: Mapping[str, str] | None = None,
    *,
    replaces_image_ok: bool = False,
) -> Report:
    """Every requirement of every wheel met by another wheel or by the image?

    ``image`` maps canonical names to versions (``None``: present, version unknown: such a
    requirement is *unverified*, not unmet). Extras asked of a wheel (``paperstack-core[torch]``)
    bring that wheel's requirements under those extras into the check. A wheel of a package the
    image already has is unmet too (carry one only for another version, and say so), unless
    ``replaces_image_ok``.
    """
    from packaging.markers import Marker
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    waived = waived or {}
    report = Report()

    def applies(marker: Marker | None, extra: str) -> bool:
        return marker is None or marker.evaluate({**MARKER_ENV, "extra": extra})

    if not replaces_image_ok:
        for name, wheel in wheels.items():
            if name in image:
                report.unmet.append(
                    f"{wheel.path.name} replaces the image's {name} {image[name] or ''}".rstrip()
                )
    todo: list[tuple[str, str]] = [(name, "") for name in wheels]  # (wheel, extra)
    seen: set[tuple[str, str]] = set()
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        wheel = wheels[name]
        who = f"{wheel.path.name}" + (f" [{extra}]" if extra else "")
        for text in wheel.requires:
            try:
                req = Requirement(text)
            except InvalidRequirement as exc:
                report.unmet.append(f"{who}: unparseable Requires-Dist {text!r} ({exc})")
                continue
            if not applies(req.marker, extra):
                continue
            if extra and applies(req.marker, ""):
                continue  # a base requirement, already checked with extra ""
            report.checked += 1
            target = canonical(req.name)
            if target in waived:
                continue
            version: str | None
            if target in wheels:
                version = wheels[target].version
                where = "in .whl/"
                todo.extend((target, canonical(e)) for e in req.extras)
            elif target in image:
                version = image[target]
                where = "in the image"
                if version is None:
                    report.unverified.append(
                        f"{who} needs {text.split(';')[0].strip()}: "
                        f"the image has {target}, version not recorded"
                    )
                    continue
            else:
                report.unmet.append(
                    f"{who} needs {text.split(';')[0].strip()}: neither in .whl/ nor in the image"
                )
                continue
            try:
                ok = req.specifier.contains(Version(version), prereleases=True)
            except InvalidVersion:
                ok = False
            if not ok:
                report.unmet.append(
                    f"{who} needs {text.split(';')[0].strip()}: {where} is {target} {version}"
                )
    return report


def installed_image(exclude: Iterable[str | os.PathLike[str]] = ()) -> dict[str, str | None]:
    """The distributions this Python sees (the GPU machine's own metadata), less those under
    ``exclude`` (where the sweep installed .whl/): the live counterpart of [image]."""
    skip = [Path(p).resolve() for p in exclude]
    out: dict[str, str | None] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        location = Path(str(dist.locate_file(""))).resolve()
        if not name or any(location == s or s in location.parents for s in skip):
            continue
        out.setdefault(canonical(name), dist.version)
    return out


# --------------------------------------------------------------------------- sizes


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def tree_bytes(root: Path = ROOT) -> int | None:
    """What travels besides the carried paths: tracked and untracked-not-ignored files (None
    where git cannot say, e.g. in a copy without .git)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root, capture_output=True, check=True, timeout=60,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    total = 0
    for rel in out.decode().split("\0"):
        path = root / rel
        if rel and path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def ignored_bytes(folder: Path) -> int:
    """Git-ignored files under ``folder`` (caches, build output). The device notes say a
    checkout's ``shared/`` travels; if that means the whole folder, these count too."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--", "."],
            cwd=folder, capture_output=True, check=True, timeout=60,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(
        (folder / rel).stat().st_size
        for rel in out.decode().split("\0")
        if rel and (folder / rel).is_file() and not (folder / rel).is_symlink()
    )


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


# --------------------------------------------------------------------------- a step's output


def write_bench(
    out: str | os.PathLike[str],
    package: str,
    rows: list[Any],
    claims: list[Any],
    config: Mapping[str, Any],
    intro: str,
) -> Path:
    """``out/bench.json`` (the results.json schema) and ``out/bench.md`` of a GPU step.

    Called after every finished comparison, not once at the end, so a step stopped at its
    budget still leaves what it measured (the sweep marks it ``partial``). ``rows`` come from
    :mod:`paperstack.bench` (medians of interleaved per-repeat ratios with their intervals).
    """
    from importlib.metadata import PackageNotFoundError, version

    from paperstack.records import (
        VERDICT_TEXT,
        Manifest,
        Results,
        atomic_write,
        write_results,
    )

    try:
        ver = version(package)
    except PackageNotFoundError:
        ver = "0+unknown"
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = Manifest.collect(package, ver, config=dict(config)).finish()
    path = write_results(
        folder / "bench.json", Results(manifest=manifest, rows=rows, claims=claims)
    )
    lines = [
        f"# {package} on a GPU",
        "",
        intro,
        "",
        "| system | metric | split | value | 95% CI | n |",
        "| --- | --- | --- | ---: | --- | ---: |",
    ]
    for r in rows:
        ci = f"[{r.ci95[0]:.4g}, {r.ci95[1]:.4g}]" if r.ci95 else ""
        lines.append(f"| {r.system} | {r.metric} | {r.split or ''} | {r.value:.4g} | {ci} | "
                     f"{r.n or ''} |")  # fmt: skip
    lines += ["", "## Claims", ""] + [
        f"- **{VERDICT_TEXT[c.verdict]}** `{c.id}`: {c.statement} ({c.describe()})" for c in claims
    ]
    if not claims:
        lines.append("- none: the paper gives no number for this measurement")
    atomic_write(folder / "bench.md", "\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/_gpu.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["check", "size"])
    parser.add_argument("--wheels", type=Path, default=WHEELS, help="the wheelhouse (.whl)")
    parser.add_argument("--data", type=Path, default=DATA, help="tools/gpu-sweep.toml")
    args = parser.parse_args(argv)
    try:
        data = load(args.data)
        if not args.wheels.is_dir() or not any(args.wheels.glob("*.whl")):
            raise GpuError(f"{args.wheels}: no wheels (python3 tools/nox -s gpu-wheelhouse)")
        wheels = read_wheels(args.wheels)
        if args.command == "check":
            report = check(wheels, data.image, data.waived)
            for line in report.unmet:
                print(f"_gpu.py: unmet: {line}")
            if report.unverified:
                # One line: which image packages the wheels lean on without a recorded version.
                names = sorted(
                    {u.split(": the image has ")[1].split(",")[0] for u in report.unverified}
                )
                print(f"_gpu.py: unverified (image version not recorded): {', '.join(names)}")
            print(
                f"_gpu.py: {len(wheels)} wheels, {report.checked} requirements checked: "
                f"{len(report.unmet)} unmet, {len(report.unverified)} unverified "
                "(image version not recorded; the sweep re-checks them on the machine)"
            )
            if report.unmet:
                raise GpuError(f"{len(report.unmet)} unmet requirement(s) in {args.wheels}")
        else:
            whl = folder_bytes(args.wheels)
            tree = tree_bytes()
            total = whl + (tree or 0)
            print(
                f"_gpu.py: {args.wheels.name}/ {mib(whl)} in {len(wheels)} wheels; working tree "
                f"{mib(tree) if tree is not None else 'unknown'}; one device call carries "
                f"{mib(total)} of at most {mib(CARRY_LIMIT)}"
            )
            shared = ROOT / "shared"
            extra = ignored_bytes(shared) if shared.is_dir() else 0
            if extra and total + extra >= CARRY_LIMIT:
                print(
                    f"_gpu.py: warning: {mib(extra)} of git-ignored files under shared/ (caches); "
                    "if the device copies shared/ whole they count: delete them before the call"
                )
            if total >= CARRY_LIMIT:
                raise GpuError(
                    f"{args.wheels}: {mib(total)} with the working tree, over the device's "
                    f"{mib(CARRY_LIMIT)}: drop a wheel or carry it separately"
                )
    except GpuError as exc:
        print(f"_gpu.py: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
