"""A domain as a folder, in the tau2-bench style: policy text, database and tool schemas.

A folder holds

- ``policy.md``: the written policy, what the target reads (tau2's ``policy.md``);
- ``db.json``: the database (validated by the base domain's schema, naming the bad field);
- ``tools.json``: the tools the target is offered, a list of OpenAI function schemas
  (``{"type": "function", "function": {"name", "description", "parameters"}}``), exactly what
  goes into a chat request's ``tools=[...]``;
- ``domain.json`` (optional): ``{"base": "retail", "policy": {...}}``.

Why a *base*: in tau2-bench the tools are Python code over the database and the policy is text;
probe-audit also needs the policy as code (the checkers) and a scenario generator. Those come
from a built-in domain, the base, named in ``domain.json`` or, without it, the one built-in
domain that implements every tool ``tools.json`` names. ``policy`` holds the numbers its
checkers use (``refund_cap``...; the built-in defaults otherwise); keep them in step with
``policy.md``, which the checkers do not read. A folder may offer a subset of the base's tools
with its own descriptions, but every schema must match the implementation's arguments, so that
what the target is told is what runs.

:func:`export` writes a built-in domain as such a folder; the shipped ``data/retail`` and
``data/airline`` folders are its output (database seed 0), and :func:`load` of them gives back
the built-in domain with that database (a test checks the round trip).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probe_audit.environment import Domain, Tool, validate_db
from probe_audit.errors import ProbeError

__all__ = ["FILES", "SHIPPED", "FolderDomain", "export", "load", "resolve", "shipped_path"]

#: The files of a domain folder (``domain.json`` is optional).
FILES = ("policy.md", "db.json", "tools.json", "domain.json")
#: Built-in domains shipped as folders (``probe audit --domain retail``).
SHIPPED = ("retail", "airline")
_JSON_TYPES = {str: "string", float: "number", int: "integer", bool: "boolean"}


@dataclasses.dataclass(frozen=True)
class FolderDomain:
    """A loaded folder: the :class:`Domain` (its ``make_db`` returns the folder's database for
    any seed), the database itself, the tool schemas as written, and where it came from."""

    domain: Domain
    db: dict[str, Any]
    tool_schemas: list[dict[str, Any]]
    base: str
    path: Path

    def schemas(self) -> list[dict[str, Any]]:
        """The ``tools=[...]`` of a chat request (a copy)."""
        return copy.deepcopy(self.tool_schemas)


def shipped_path(name: str) -> Path:
    """The folder of a shipped built-in domain."""
    if name not in SHIPPED:
        raise ProbeError(f"unknown built-in domain {name!r}; known: {', '.join(SHIPPED)}")
    return Path(__file__).with_name("data") / name


def resolve(spec: str) -> FolderDomain:
    """``--domain``: a folder path, or the name of a shipped domain (``retail``)."""
    path = Path(spec)
    if path.is_dir():
        return load(path)
    if spec in SHIPPED:
        return load(shipped_path(spec))
    raise ProbeError(f"--domain {spec}: not a folder, nor a built-in domain ({', '.join(SHIPPED)})")


def _read_json(path: Path) -> Any:
    """The JSON in ``path``, or one line saying why not (missing, unreadable, not JSON)."""
    if not path.is_file():
        raise ProbeError(f"{path}: missing (a domain folder needs {', '.join(FILES[:3])})")
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise ProbeError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except OSError as exc:  # a folder where a file should be, no permission
        raise ProbeError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def _schema_tools(path: Path, data: Any) -> list[dict[str, Any]]:
    """``tools.json`` checked for the OpenAI function shape; bare function objects (no
    ``type``/``function`` wrapper) are accepted and wrapped."""
    if not isinstance(data, list) or not data:
        raise ProbeError(f"{path}: expected a non-empty JSON list of OpenAI function schemas")
    out: list[dict[str, Any]] = []
    for k, item in enumerate(data):
        fn = item.get("function") if isinstance(item, dict) and "function" in item else item
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ProbeError(f"{path}: item {k} has no function name")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict) or not isinstance(params.get("properties", {}), dict):
            raise ProbeError(f"{path}: tool {fn['name']}: 'parameters' is not a JSON schema object")
        out.append({"type": "function", "function": {**fn, "parameters": params}})
    names = [t["function"]["name"] for t in out]
    if len(set(names)) != len(names):
        raise ProbeError(f"{path}: a tool is listed twice ({', '.join(sorted(names))})")
    return out


def _check_tool(path: Path, schema: Mapping[str, Any], tool: Tool) -> None:
    """The schema must describe the implementation's arguments: same names, compatible types."""
    fn = schema["function"]
    props: Mapping[str, Any] = fn["parameters"].get("properties", {})
    if set(props) != set(tool.parameters):
        raise ProbeError(
            f"{path}: tool {tool.name}: arguments {sorted(props)} differ from the "
            f"implementation's {sorted(tool.parameters)}"
        )
    for arg, kind in tool.parameters.items():
        declared = props[arg].get("type") if isinstance(props[arg], dict) else None
        allowed = {_JSON_TYPES[kind]} | ({"integer"} if kind is float else set())
        if declared is not None and declared not in allowed:
            raise ProbeError(
                f"{path}: tool {tool.name}: argument {arg!r} is {declared!r} in the schema, "
                f"{_JSON_TYPES[kind]!r} in the implementation"
            )


def load(folder: str | Path) -> FolderDomain:
    """Read a domain folder (see the module docstring); every problem is one line naming the
    file and the field or tool at fault."""
    from probe_audit import domains

    root = Path(folder)
    if not root.is_dir():
        raise ProbeError(f"{root}: not a domain folder (it is not a directory)")
    meta_path = root / "domain.json"
    meta = _read_json(meta_path) if meta_path.is_file() else {}
    if not isinstance(meta, dict):
        raise ProbeError(f"{meta_path}: expected a JSON object")
    unknown = sorted(set(meta) - {"base", "policy", "db_seed", "format"})
    if unknown:
        raise ProbeError(f"{meta_path}: unknown field(s) {', '.join(unknown)}")
    tools_path = root / "tools.json"
    schemas = _schema_tools(tools_path, _read_json(tools_path))
    names = [s["function"]["name"] for s in schemas]
    base = meta.get("base")
    if base is None:
        fits = [n for n in domains.NAMES if set(names) <= set(domains.get(n).tools)]
        if len(fits) != 1:
            raise ProbeError(
                f"{root}: no domain.json, and {'no' if not fits else 'more than one'} built-in "
                f"domain implements the tools of tools.json ({', '.join(names)}); name the base "
                'in domain.json: {"base": "retail"}'
            )
        base = fits[0]
    if base not in domains.NAMES:
        raise ProbeError(
            f"{meta_path}: base {base!r} is not a built-in domain ({', '.join(domains.NAMES)})"
        )
    policy_numbers = meta.get("policy")
    if policy_numbers is not None and not isinstance(policy_numbers, dict):
        raise ProbeError(f"{meta_path}: 'policy' must be a JSON object of policy numbers")
    built = domains.get(base, policy_numbers)  # PolicyError names a bad number
    tools: dict[str, Tool] = {}
    for schema in schemas:
        name = schema["function"]["name"]
        impl = built.tools.get(name)
        if impl is None:
            raise ProbeError(
                f"{tools_path}: tool {name!r} has no implementation in the {base} domain "
                f"(it has {', '.join(built.tools)})"
            )
        _check_tool(tools_path, schema, impl)
        description = str(schema["function"].get("description") or impl.description)
        tools[name] = dataclasses.replace(impl, description=description)
    policy_path = root / "policy.md"
    try:
        policy_text = policy_path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ProbeError(
            f"{policy_path}: missing (a domain folder needs {', '.join(FILES[:3])})"
        ) from None
    if not policy_text:
        raise ProbeError(f"{policy_path}: empty; the target needs a written policy")
    db_path = root / "db.json"
    db = _read_json(db_path)
    validate_db(built, db, source=str(db_path))
    frozen = json.loads(json.dumps(db))
    domain = dataclasses.replace(
        built,
        policy=policy_text,
        tools=tools,
        make_db=lambda seed: json.loads(json.dumps(frozen)),
    )  # __post_init__ checks the auth and record tools are still offered
    return FolderDomain(domain, frozen, schemas, base, root)


def export(
    name: str,
    out: str | Path,
    *,
    db_seed: int = 0,
    policy: Mapping[str, Any] | None = None,
) -> Path:
    """Write the built-in domain ``name`` (database of ``db_seed``) as a domain folder."""
    from probe_audit import domains

    built = domains.get(name, policy)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    module = domains.retail if name == "retail" else domains.airline
    numbers = (module.RetailPolicy if name == "retail" else module.AirlinePolicy).model_validate(
        dict(policy or {})
    )
    files = {
        "policy.md": built.policy + "\n",
        "db.json": json.dumps(built.database(db_seed), indent=1, sort_keys=True) + "\n",
        "tools.json": json.dumps([t.schema() for t in built.tools.values()], indent=1) + "\n",
        "domain.json": json.dumps(
            {"base": name, "db_seed": db_seed, "policy": numbers.model_dump(mode="json")},
            indent=1,
            sort_keys=True,
        )
        + "\n",
    }
    for file, text in files.items():
        (root / file).write_text(text, encoding="utf-8")
    return root
