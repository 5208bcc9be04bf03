"""probe bench: its ratios."""

from probe_audit.cli import main

from paperstack.records import load_results


def test_bench_writes_ratios(tmp_path):
    assert (
        main(["bench", "--quick", "--no-progress", "--pretrain-steps", "3", "--out", str(tmp_path)])
        == 0
    )
    results = load_results(tmp_path / "bench.json")
    assert results.row("rule-game", "episodes_per_second").value > 0
    assert results.row("probe-step", "time_ratio_to_plain_grpo").value > 0
