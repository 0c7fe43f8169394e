import json

import pytest
from typer.testing import CliRunner

from rooftune.candidates import AttentionShape, Config, GemmShape, MoeShape
from rooftune.eval.datasets.format import ShapeRecords, Trial, write_manifest, write_shape
from rooftune.eval.scoring.reports import attention_summary, geomean, moe_summary, pooled_repeatability, shape_rows, summary
from rooftune.tuner.cli.app import app


def _cfg(bm):
    return Config.make(4, 3, BLOCK_M=bm, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, SPLIT_K=1)


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "train"
    (tmp_path / "shapes.json").write_text(json.dumps([
        {"m": 64, "n": 4096, "k": 4096, "layout": "nk", "source": "llama decode"},
        {"m": 33, "n": 160, "k": 48, "layout": "nk", "source": "random"},
        {"m": 16, "n": 50257, "k": 768, "layout": "nk", "source": "gpt2 lm_head decode"}]))
    write_manifest(root, {"kernel": "gemm", "shapes_file": "shapes.json"})
    # shape 1: final passes agree exactly; the space's best (10 us) is 0.9x cuBLAS (9 us)
    write_shape(root, ShapeRecords(GemmShape(64, 4096, 4096, layout="nk"), (
        Trial(_cfg(16), 10.0, retime_us=10.0, retime2_us=10.0),
        Trial(_cfg(32), 12.0, retime_us=12.0, retime2_us=12.0),
        Trial(_cfg(64), None, error="check: bad")), {"cublas": 9.0}))
    # shape 2: pass B finds config 32 10% slower relative to the fastest; the fastest swaps by 0%
    write_shape(root, ShapeRecords(GemmShape(33, 160, 48, layout="nk"), (
        Trial(_cfg(16), 4.0, retime_us=4.0, retime2_us=4.0),
        Trial(_cfg(32), 5.0, retime_us=5.0, retime2_us=5.5)), {"cublas": 8.0}))
    # shape 3: N = 50257 leaves rows unaligned, where cuBLAS is slow (5x the space's best); no final passes
    write_shape(root, ShapeRecords(GemmShape(16, 50257, 768, layout="nk"), (
        Trial(_cfg(16), 20.0),), {"cublas": 100.0}))
    return root


def test_rows_and_summary(dataset):
    rows = {r.shape: r for r in shape_rows(dataset)}
    big = rows["64x4096x4096 (nk, bf16)"]
    assert (big.source, big.legal, big.errors, big.best_us) == ("llama decode", 3, 1, 10.0)
    assert big.vs_baseline == pytest.approx(0.9)
    totals = summary(list(rows.values()))
    assert big.aligned and not rows["16x50257x768 (nk, bf16)"].aligned
    assert totals["vs_cublas_geomean_llm"] == pytest.approx(geomean([0.9, 5.0]))
    assert (totals["vs_cublas_geomean_llm_aligned"], totals["llm_aligned_shapes"]) == (pytest.approx(0.9), 1)
    # by phase, from the source label: the aligned decode shape; no aligned prefill shape
    assert (totals["vs_cublas_geomean_decode_aligned"], totals["decode_aligned_shapes"]) == (pytest.approx(0.9), 1)
    assert totals["prefill_aligned_shapes"] == 0
    assert totals["vs_cublas_geomean_random"] == pytest.approx(2.0)
    assert totals["vs_cublas_geomean"] == pytest.approx(geomean([0.9, 2.0, 5.0]))
    assert totals["errors"] == 1


def test_pooled_repeatability(dataset):
    rep = pooled_repeatability(dataset)
    assert rep["shapes"] == 2 and rep["configs"] == 4
    assert rep["ratio_p90"] == pytest.approx(0.1)  # 1.25 -> 1.375 in shape 2
    assert rep["ratio_median"] == pytest.approx(0.0)
    assert rep["fastest_within_1pct_both"] == 1.0


def test_report_command(dataset, tmp_path):
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    result = CliRunner().invoke(app, ["report", "gemm", "--data", str(dataset), "--json", str(out), "--no-rows",
                                      "--markdown", str(md)])
    assert result.exit_code == 0, result.output
    assert "3 shapes" in result.output and "aligned rows 0.900 (1)" in result.output and json.loads(out.read_text())["summary"]["errors"] == 1
    table = md.read_text().splitlines()
    assert table[-3].startswith("| 64x4096x4096") and "0.900" in table[-3]  # slowest vs cuBLAS first
    assert table[-2].startswith("| 33x160x48") and "2.000" in table[-2]
    assert table[-1].startswith("| 16x50257x768") and "5.000" in table[-1]
    bad = CliRunner().invoke(app, ["report", "gemm", "--data", str(tmp_path / "nothing")])
    assert bad.exit_code == 2 and "no manifest.json" in bad.output


@pytest.fixture
def attention_dataset(tmp_path):
    root = tmp_path / "train"
    (tmp_path / "shapes.json").write_text(json.dumps([
        {"batch": 4, "heads": 32, "seq": 4096, "head_dim": 128, "source": "llama2-7b prefill"},
        {"batch": 31, "heads": 16, "kv_heads": 2, "seq": 64, "head_dim": 64, "source": "random gqa8"}]))
    write_manifest(root, {"kernel": "attention", "shapes_file": "shapes.json"})

    def cfg(bm, tma):
        return Config.make(4, 2, BLOCK_M=bm, BLOCK_N=64, ORDER=1, TMA=tma)

    # long shape: the space's best (1000 us) is 0.85x SDPA (850 us); one config failed its check
    write_shape(root, ShapeRecords(AttentionShape(4, 32, 4096, 128), (
        Trial(cfg(64, 1), 1000.0, retime_us=1000.0, retime2_us=1000.0),
        Trial(cfg(128, 1), 1100.0, retime_us=1100.0, retime2_us=1100.0),
        Trial(cfg(64, 0), None, error="check: bad")), {"sdpa": 850.0, "sdpa:cudnn": 840.0, "sdpa:flash": 1500.0}))
    # short shape: SDPA's launch costs dominate, the space is 2x faster
    write_shape(root, ShapeRecords(AttentionShape(31, 16, 64, 64, kv_heads=2), (
        Trial(cfg(64, 1), 9.0),), {"sdpa": 18.0}))
    return root


def test_attention_rows_and_summary_share_the_gemm_report(attention_dataset):
    rows = {r.shape: r for r in shape_rows(attention_dataset, kernel="attention")}
    long = rows["4x32x4096x128"]
    assert (long.source, long.legal, long.errors, long.best_us, long.baseline_us) == ("llama2-7b prefill", 3, 1, 1000.0, 850.0)
    assert long.vs_baseline == pytest.approx(0.85) and long.tags == ("head_dim 128", "seq >= 1024")
    assert rows["31x16x64x64x2"].source == "random gqa8" and rows["31x16x64x64x2"].vs_baseline == pytest.approx(2.0)
    totals = attention_summary(list(rows.values()))
    assert totals["vs_sdpa_geomean"] == pytest.approx(geomean([0.85, 2.0])) and totals["errors"] == 1
    assert totals["by_tag"]["seq >= 1024"] == {"vs_sdpa_geomean": pytest.approx(0.85),
                                               "vs_fastest_geomean": pytest.approx(0.84), "shapes": 1}
    assert totals["by_tag"]["head_dim 64"]["vs_sdpa_geomean"] == pytest.approx(2.0)
    # each backend where the sweep timed them: the fastest route of the long shape is cuDNN
    assert long.routes_us == {"sdpa:cudnn": 840.0, "sdpa:flash": 1500.0} and long.vs_fastest == pytest.approx(0.84)
    assert rows["31x16x64x64x2"].vs_fastest is None and totals["backends_timed"] == 1
    assert totals["by_backend"] == {"sdpa:cudnn": {"vs_geomean": pytest.approx(0.84), "fastest_on": 1, "shapes": 1},
                                    "sdpa:flash": {"vs_geomean": pytest.approx(1.5), "fastest_on": 0, "shapes": 1}}


def test_report_attention_command(attention_dataset, tmp_path):
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    result = CliRunner().invoke(app, ["report", "attention", "--data", str(attention_dataset), "--json", str(out),
                                      "--markdown", str(md)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "vs SDPA" in text and f"all {geomean([0.85, 2.0]):.3f}" in text and "seq >= 1024 0.850 (1)" in text
    assert "fastest SDPA backend time / best time: all 0.840 (1 shapes)" in text and "flash 1.500 (1, fastest on 0)" in text
    assert "fastest within 1% in both passes: 100% of shapes" in text
    assert json.loads(out.read_text())["summary"]["errors"] == 1
    table = md.read_text().splitlines()
    assert table[0].startswith("# Best config of the space vs SDPA") and "| SDPA µs | SDPA / best |" in table[4]
    assert table[-2].startswith("| 4x32x4096x128 ") and table[-1].startswith("| 31x16x64x64x2 ")
    gemm = CliRunner().invoke(app, ["report", "gemm", "--data", str(attention_dataset)])
    assert gemm.exit_code == 2 and "attention measurements, not gemm" in " ".join(gemm.output.split())


@pytest.fixture
def moe_dataset(tmp_path):
    root = tmp_path / "train"
    (tmp_path / "shapes.json").write_text(json.dumps([
        {"experts": 8, "topk": 2, "hidden": 256, "intermediate": 128, "tokens": 4, "gemm": "down", "source": "tiny tp1"},
        {"experts": 8, "topk": 2, "hidden": 256, "intermediate": 128, "tokens": 512, "gemm": "gate_up",
         "source": "tiny tp1"},
        {"experts": 4, "topk": 1, "hidden": 128, "intermediate": 64, "tokens": 96, "gemm": "down", "source": "small tp2"}]))
    write_manifest(root, {"kernel": "moe", "shapes_file": "shapes.json"})

    def cfg(bm):
        return Config.make(4, 3, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=64, BLOCK_SIZE_K=64, GROUP_SIZE_M=1)

    # decode-sized: the space's best (10 us) is 3x torch's route (30 us), 2x its grouped GEMM alone; one failure
    write_shape(root, ShapeRecords(MoeShape(8, 2, 256, 128, 4, "down"), (
        Trial(cfg(16), 10.0, retime_us=10.0, retime2_us=10.0), Trial(cfg(32), 11.0, retime_us=11.0, retime2_us=11.0),
        Trial(cfg(64), None, error="check: bad")), {"grouped_mm": 30.0, "grouped_mm:gemm": 20.0}))
    # prefill-sized: the route is 0.8x the best; no route without it timed
    write_shape(root, ShapeRecords(MoeShape(8, 2, 256, 128, 512, "gate_up"), (
        Trial(cfg(64), 100.0),), {"grouped_mm": 80.0}))
    write_shape(root, ShapeRecords(MoeShape(4, 1, 128, 64, 96, "down"), (
        Trial(cfg(16), 5.0),), {"grouped_mm": 10.0, "grouped_mm:gemm": 5.0}))
    return root


def test_moe_rows_and_summary_by_gemm_token_band_and_layer(moe_dataset):
    rows = {r.shape: r for r in shape_rows(moe_dataset, kernel="moe")}
    small = rows["8x2x256x128x4 down"]
    assert (small.source, small.legal, small.errors, small.best_us, small.baseline_us) == ("tiny tp1", 3, 1, 10.0, 30.0)
    assert small.vs_baseline == pytest.approx(3.0) and small.tags == ("down", "tokens <= 64")
    assert rows["8x2x256x128x512 gate_up"].tags == ("gate_up", "tokens > 64")
    totals = moe_summary(list(rows.values()))
    assert totals["vs_grouped_mm_geomean"] == pytest.approx(geomean([3.0, 0.8, 2.0])) and totals["errors"] == 1
    # the grouped GEMM alone, over the shapes where it was timed
    assert totals["vs_gemm_only_geomean"] == pytest.approx(geomean([2.0, 1.0]))
    assert totals["by_tag"]["down"]["vs_grouped_mm_geomean"] == pytest.approx(geomean([3.0, 2.0]))
    assert totals["by_tag"]["tokens > 64"]["shapes"] == 2
    assert totals["by_layer"]["tiny tp1"] == {"vs_grouped_mm_geomean": pytest.approx(geomean([3.0, 0.8])),
                                              "vs_gemm_only_geomean": pytest.approx(2.0), "shapes": 2}


def test_report_moe_command(moe_dataset, tmp_path):
    md = tmp_path / "r.md"
    result = CliRunner().invoke(app, ["report", "moe", "--data", str(moe_dataset), "--markdown", str(md)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"all {geomean([3.0, 0.8, 2.0]):.3f}" in text and "small tp2 2.000 (1)" in text and "errors 1" in text
    table = md.read_text().splitlines()
    assert "torch._grouped_mm" in table[0] and table[-1].startswith("| 8x2x256x128x4 down ")  # fastest vs it last
    wrong = CliRunner().invoke(app, ["report", "gemm", "--data", str(moe_dataset)])
    assert wrong.exit_code == 2 and "moe measurements, not gemm" in " ".join(wrong.output.split())
