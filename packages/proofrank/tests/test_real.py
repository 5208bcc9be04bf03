"""The real-model arm (``demo --real``) on its plumbing budget (``--quick``: 2 problems, 24
tokens): SmolLM2 in two configurations as provers, judged by the rule judge."""

import pytest
from proofrank.cli import main
from proofrank.real import CONCISE_SYSTEM, SystemPrompted

from paperstack.llm import RuleAgent
from paperstack.records import load_results


class Echo(RuleAgent):
    def respond(self, messages):
        return messages[0]["content"]


def test_a_configuration_replaces_the_system_prompt():
    prover = SystemPrompted(Echo(0), CONCISE_SYSTEM, "concise")
    prompt = [{"role": "system", "content": "old"}, {"role": "user", "content": "Problem: x"}]
    assert prover.generate([prompt]) == [[CONCISE_SYSTEM]]


def test_real_arm_refuses_flags_it_does_not_use(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--real", "--quick", "--samples", "2", "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert "not used by --real" in capsys.readouterr().err


@pytest.mark.slow
def test_real_arm_runs_smollm2_on_a_tiny_budget(tmp_path):
    """Both configurations through one served SmolLM2 (the running server that
    PAPERSTACK_SERVED_BASE_URL names, else vllm serve or transformers serve started here)."""
    pytest.importorskip("httpx")
    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    out = tmp_path / "real"
    assert main(["demo", "--real", "--quick", "--no-progress", "--out", str(out)]) == 0
    results = load_results(out / "results.json")
    assert results.manifest.config["real"] is True
    ids = [c.id for c in results.claims]
    assert ids == [
        "premise_rule_judge_decides_real_proofs",
        "concise_configuration_writes_shorter_proofs",
    ]
    verdicts = results.manifest.config["verdicts"]
    assert set(verdicts) == {"smollm2-default", "smollm2-concise"}
    assert all(sum(v.values()) == 2 for v in verdicts.values())
    assert results.row("smollm2-default", "words", "real").items is not None
    assert results.manifest.config["served_calls"] == 4  # 2 problems x 2 configurations
    assert results.manifest.config["engine"]
