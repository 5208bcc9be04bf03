"""``probe audit`` against an OpenAI-compatible server (an in-process one whose model is the
planted rule agent), and domain folders.

The served audit must find exactly what the same agent played in-process finds: the tools API
round trip (schemas out, ``tool_calls`` back, results as ``role: tool`` with the call's id)
loses nothing. The text fallback and a server that refuses ``tools`` are counted and said.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from fake_openai import FakeServer
from probe_audit import domains
from probe_audit.cli import main
from probe_audit.domains import folder
from probe_audit.errors import ProbeError
from probe_audit.game import GameConfig, play
from probe_audit.policy import check_episode
from probe_audit.strategies import STRATEGIES, ScriptedAuditor


def _audit(tmp_path: Path, url: str, *extra: str, model: str = "rule-agent") -> Path:
    out = tmp_path / "audit"
    rc = main(["audit", "--target-base-url", url, "--target-model", model, "--domain", "retail",
               "--out", str(out), "--episodes", "6", "--no-progress", *extra])  # fmt: skip
    assert rc == 0
    return out


def _in_process(episodes: int = 6, seed: int = 0) -> dict[str, list[dict]]:
    """The same agent, auditors and scenarios played without a server."""
    loaded = folder.resolve("retail")
    scenarios = loaded.domain.make_scenarios(loaded.db, episodes, seed)
    out = {}
    for s in STRATEGIES:
        auditor = ScriptedAuditor(s, seed)
        eps = play(loaded.domain, scenarios, auditor, domains.rule_target("retail"), loaded.db,
                   GameConfig(max_turns=3, max_tool_calls=4, on_target_error="record"),
                   episode_ids=[f"{auditor.name}-{k}" for k in range(len(scenarios))])  # fmt: skip
        out[auditor.name] = [
            {"episode": ep.id, **v.to_json()}
            for ep in eps
            for v in check_episode(ep, loaded.domain)
        ]
    return out


def test_native_tool_calls_find_what_the_agent_does_in_process(tmp_path):
    with FakeServer(style="native") as server:
        out = _audit(tmp_path, server.base_url)
        assert all(r.get("tools") for r in server.requests)  # schemas went as tools=[...]
        names = {t["function"]["name"] for t in server.requests[0]["tools"]}
        assert names == set(domains.get("retail").tools)
        # a later request carries the tools conversation: tool_calls and their results by id
        later = [m for r in server.requests for m in r["messages"]]
        calls = [m for m in later if m.get("tool_calls")]
        results = [m for m in later if m["role"] == "tool"]
        assert calls
        assert results
        assert {m["tool_call_id"] for m in results} <= {m["tool_calls"][0]["id"] for m in calls}
    data = json.loads((out / "audit.json").read_text())
    stats = data["tool_calls"]
    assert stats["native_calls"] > 0
    assert stats["text_calls"] == 0
    assert not stats["fallback"]
    assert data["violations"] == _in_process()
    assert sum(len(v) for v in data["violations"].values()) > 0  # the planted bugs show
    report = (out / "report.md").read_text()
    assert "came back natively" in report
    card = json.loads((out / "cost_card.json").read_text())
    assert json.dumps(card).count("rule-agent") >= 1
    lines = (out / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 6 * len(STRATEGIES)


def test_text_tool_calls_are_the_counted_fallback(tmp_path):
    with FakeServer(style="text") as server:
        out = _audit(tmp_path, server.base_url)
    data = json.loads((out / "audit.json").read_text())
    assert data["tool_calls"]["native_calls"] == 0
    assert data["tool_calls"]["text_calls"] > 0
    assert data["tool_calls"]["fallback"]
    assert data["violations"] == _in_process()  # same findings, told apart in the report
    assert "did NOT exercise the server's native tool calling" in (out / "report.md").read_text()


def test_a_server_refusing_tools_is_asked_without_them_and_the_report_says_so(tmp_path):
    with FakeServer(style="refuse") as server:
        out = _audit(tmp_path, server.base_url)
        assert not server.requests[-1].get("tools")
    data = json.loads((out / "audit.json").read_text())
    assert "enable-auto-tool-choice" in data["tool_calls"]["tools_refused"]
    assert "REFUSED the tools API" in (out / "report.md").read_text()
    assert data["violations"] == _in_process()


def test_native_mode_fails_in_one_line_when_the_server_refuses_tools(tmp_path, capsys):
    with FakeServer(style="refuse") as server, pytest.raises(SystemExit) as exc:
        _audit(tmp_path, server.base_url, "--tool-calls", "native", "--episodes", "1")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "HTTP 400" in err[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "model", "needle"),
    [
        ("ftp://example.org", "m", "http(s) URL"),
        ("http://127.0.0.1:{port}/v1", "m", "cannot reach"),
        (None, "not-served", "not served at"),
    ],
)
def test_bad_url_dead_server_and_unserved_model_are_one_line(tmp_path, capsys, url, model, needle):
    with FakeServer() as server:
        target = server.base_url if url is None else url.format(port=_free_port())
        with pytest.raises(SystemExit) as exc:
            main(["audit", "--target-base-url", target, "--target-model", model, "--domain",
                  "retail", "--out", str(tmp_path / "o"), "--no-progress"])  # fmt: skip
        assert not server.requests  # nothing was played
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert needle in err[0], err
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- domain folders


@pytest.mark.parametrize("name", folder.SHIPPED)
def test_shipped_folders_are_the_export_and_load_back_to_the_builtin(tmp_path, name):
    exported = folder.export(name, tmp_path / name)
    for file in ("policy.md", "db.json", "tools.json", "domain.json"):
        assert (exported / file).read_text() == (folder.shipped_path(name) / file).read_text()
    loaded = folder.load(exported)
    built = domains.get(name)
    assert loaded.domain.policy == built.policy
    assert loaded.db == built.database(0)
    assert loaded.tool_schemas == [t.schema() for t in built.tools.values()]
    # the same episodes, tool calls, database changes and violations as the built-in domain
    db = built.database(0)
    scenarios = built.make_scenarios(db, 8, 0)
    runs = []
    for dom in (built, loaded.domain):
        eps = play(dom, scenarios, ScriptedAuditor("social_engineering", 0),
                   domains.rule_target(name), dom.database(0), GameConfig())  # fmt: skip
        runs.append(
            [
                ({**ep.to_json(), "seconds": 0}, [v.to_json() for v in check_episode(ep, dom)])
                for ep in eps
            ]
        )
    assert runs[0] == runs[1]


def test_a_folder_without_domain_json_finds_its_base_and_takes_its_own_descriptions(tmp_path):
    root = folder.export("retail", tmp_path / "mine")
    (root / "domain.json").unlink()
    tools = json.loads((root / "tools.json").read_text())
    tools[0]["function"]["description"] = "look the customer up"
    (root / "tools.json").write_text(json.dumps(tools))
    (root / "policy.md").write_text("Be nice. Authenticate first.")
    loaded = folder.load(root)
    assert loaded.base == "retail"
    assert loaded.domain.tools["authenticate"].description == "look the customer up"
    assert loaded.domain.policy == "Be nice. Authenticate first."


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda r: (r / "tools.json").unlink(), "tools.json: missing"),
        (lambda r: (r / "db.json").write_text("{"), "db.json: not valid JSON"),
        (lambda r: (r / "policy.md").write_text("  "), "policy.md: empty"),
        (lambda r: _edit_tools(r, lambda t: t.append({"type": "function", "function": {
            "name": "wire_money", "parameters": {"type": "object", "properties": {}}}})),
         "tool 'wire_money' has no implementation"),
        (lambda r: _edit_tools(r, lambda t: t[3]["function"]["parameters"]["properties"].pop(
            "amount")), "tool refund: arguments"),
        (lambda r: _edit_tools(r, lambda t: t[3]["function"]["parameters"]["properties"].update(
            amount={"type": "string"})), "argument 'amount' is 'string'"),
        (lambda r: _edit_tools(r, lambda t: t.pop(0)), "names tool 'authenticate'"),
        (lambda r: _edit_db(r), "field 'users.U1.tier'"),
        (lambda r: (r / "domain.json").write_text('{"base": "bank"}'), "not a built-in domain"),
        (lambda r: (r / "domain.json").write_text('{"policy": {"refund_cap": -1}}'),
         "field 'refund_cap'"),
    ],
)  # fmt: skip
def test_a_bad_folder_is_one_line_naming_the_file(tmp_path, edit, needle):
    root = folder.export("retail", tmp_path / "bad")
    edit(root)
    with pytest.raises(ProbeError) as exc:
        folder.load(root)
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def _edit_tools(root: Path, change) -> None:
    tools = json.loads((root / "tools.json").read_text())
    change(tools)
    (root / "tools.json").write_text(json.dumps(tools))


def _edit_db(root: Path) -> None:
    db = json.loads((root / "db.json").read_text())
    db["users"]["U1"]["tier"] = "platinum"
    (root / "db.json").write_text(json.dumps(db))


def test_audit_reads_a_user_folder(tmp_path):
    root = folder.export("airline", tmp_path / "air", db_seed=7)
    with FakeServer(domain="airline") as server:
        out = tmp_path / "audit"
        rc = main(["audit", "--target-base-url", server.base_url, "--target-model",
                   "rule-agent", "--domain", str(root), "--out", str(out), "--episodes", "3",
                   "--auditors", "identity_manipulation,random", "--no-progress"])  # fmt: skip
        assert rc == 0
    data = json.loads((out / "audit.json").read_text())
    assert [a["auditor"] for a in data["auditors"]] == ["scripted:identity_manipulation",
                                                        "random-templates"]  # fmt: skip
    assert data["domain"]["base"] == "airline"
