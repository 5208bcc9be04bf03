"""The demo's rows and claims, its input refusals, and the bench's ratios and claims."""

import pytest
from nf12.cli import main
from nf12.demo import QUICK, DemoConfig, claims_for, rows_for, run_weight_set, seed_rows
from test_commands import one_line_error

from paperstack.records import Claim, load_results


def test_demo_pipeline_rows_and_claims_on_a_small_weight_set(gaussian):
    state = {
        "a.weight": gaussian,
        "a.bias": gaussian[0].clone(),
        "b.weight": gaussian.t().contiguous(),
    }
    cfg = DemoConfig(qwen_hidden=64, qwen_layers=1, qwen_vocab=64, repeats=3, groups=(8, 32))
    measured = run_weight_set("minilm", state, cfg)
    rows = rows_for("minilm", measured)
    rows += seed_rows("qwen3-random", {0: measured, 1: measured})
    claims = {c.id: c for c in claims_for(rows)}
    assert next(iter(claims)) == "premise_exponents_cluster"
    assert claims["lossless"].exact
    assert claims["lossless"].held
    assert claims["decode_faster_than_huffman"].method == "t"  # 3 repeats: no bootstrap
    assert claims["bits_le_12_1"].method == "t"  # two matrices
    coverage = next(r for r in rows if r.key.metric == "window_coverage" and r.split == "minilm")
    assert coverage.k == measured.in_window
    assert coverage.n == 2 * gaussian.numel()
    escape = next(r for r in rows if r.metric == "escape_rate_g32" and r.split == "minilm")
    assert escape.n == 96 * 7 + 200 * 3
    for claim in claims.values():  # every verdict follows from the rows
        again = Claim.compare(claim.id, claim.statement, rows, claim.lhs, claim.op, claim.rhs,
                              claim.margin, exact=claim.exact)  # fmt: skip
        assert again.verdict == claim.verdict


def test_lossless_claim_is_not_held_when_one_tensor_differs(gaussian):
    cfg = DemoConfig(qwen_hidden=64, qwen_layers=1, qwen_vocab=64, repeats=2, groups=(8,))
    measured = run_weight_set("minilm", {"a.weight": gaussian}, cfg)
    measured.mismatched = 1
    rows = rows_for("minilm", measured)
    lossless = next(c for c in claims_for(rows) if c.id == "lossless")
    assert lossless.verdict == "not_held"


def test_demo_rejects_flags_it_cannot_honour(tmp_path, capsys):
    out = tmp_path / "out"
    one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--device", "cuda"], "cuda")
    one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--model",
                            str(tmp_path / "nope")], "nope")  # fmt: skip
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x40\x00\x00\x00\x00\x00\x00\x00{}")
    one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--model", str(bad)],
                   "bad.safetensors")  # fmt: skip
    assert not out.exists()  # a demo that fails on its input leaves no empty --out behind
    one_line_error(capsys, ["demo", "--quick", "--out", str(out), "--threads", "0"], "--threads 0")
    one_line_error(capsys, ["bench", "--quick", "--out", str(out), "--repeats", "1"], "--repeats 1")
    assert not out.exists()


def test_bench_writes_interleaved_medians_checked_outputs_and_paper_claims(tmp_path, capsys):
    assert main(["bench", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "bench.json")
    row = results.row("nf12-decode", "speedup_vs_huffman-decode", "512x512")
    assert row.value > 0
    assert row.n == 6
    assert row.ci95 is not None
    assert row.ci95[0] <= row.value <= row.ci95[1]
    for system, metric in (("nf12-decode", "matches_memcpy"), ("huffman-decode", "matches_memcpy"),
                           ("nf12-gemv", "matches_bf16-gemv")):  # fmt: skip
        assert results.row(system, metric, "1024x1024").value == 1.0  # bit-exact in the run
    claims = {c.id: c for c in results.claims}
    assert set(claims) == {
        "cpu_decode_bit_exact", "cpu_gemv_bit_exact", "cpu_decode_3_3x_huffman",
        "cpu_gemv_1_35x_bf16",
    }  # fmt: skip
    assert claims["cpu_decode_bit_exact"].held
    assert claims["cpu_gemv_bit_exact"].held
    assert results.manifest.config["threads"] == 1
    assert (tmp_path / "bench.md").is_file()
    out = capsys.readouterr().out
    assert "nf12: cpu_decode_3_3x_huffman:" in out  # every claim printed with its verdict
    assert "held /" in out


def test_a_corrupt_minilm_cache_entry_is_named_in_one_line(tmp_path, monkeypatch):
    import nf12.demo
    from nf12.errors import Nf12Error

    cached = tmp_path / "model.safetensors"
    cached.write_bytes(b'\x10\x00\x00\x00\x00\x00\x00\x00{"a":')  # cut short
    monkeypatch.setattr(nf12.demo, "minilm_file", lambda: cached)
    with pytest.raises(Nf12Error, match="corrupt cache entry") as info:
        nf12.demo.minilm_state()
    assert str(cached) in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_demo_quick_writes_results_with_the_claims(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    results = load_results(tmp_path / "results.json")
    assert results.manifest.package == "nf12-format"
    assert results.claims[0].id == "premise_exponents_cluster"
    assert next(c for c in results.claims if c.id == "lossless").held
    assert (tmp_path / "report.md").read_text().startswith("# nf12-format")
    assert QUICK.repeats == 3
