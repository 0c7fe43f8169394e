"""`rooftune explain` and `rooftune eval` through Typer's runner."""

import gzip
import json

from typer.testing import CliRunner

from rooftune.candidates.tutorial import TUTORIAL_GEMM
from rooftune.tuner.cli.app import app
from rooftune.tuner.search.strategies import STATIC_ATTENTION

runner = CliRunner()
# The tutorial's configs (the first, 128x256x64 w8 s3, fastest), a slow one and a compile failure.
PROBE = "M,N,K,BM,BN,BK,stages,warps,GM,us,err\n2048,2048,2048,cublas,,,,,,40.0,\n" + "".join(
    f"2048,2048,2048,{bm},{bn},{bk},{s},{w},8,{50.0 + 10 * i},\n" for i, (bm, bn, bk, s, w) in enumerate(TUTORIAL_GEMM)
) + "2048,2048,2048,16,32,32,2,4,1,900.0,\n2048,2048,2048,256,256,128,5,8,8,,OutOfResources\n"


def test_explain_gemm_top_and_named_config():
    result = runner.invoke(app, ["explain", "gemm", "--shape", "4096x4096x4096", "--top", "3", "--config",
                                 "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,SPLIT_K=1,TMA=1,PERSISTENT=0,FIXUP=0,BLOCK_N2=0,num_warps=8,num_stages=3"])
    assert result.exit_code == 0, result.output
    assert "top 3 of" in result.output and "named config: rank" in result.output
    assert "dominant" in result.output and "waves" in result.output


def test_explain_shows_the_neighbour_votes_part(shipped_triton):
    """The shipped GEMM residual carries a neighbour vote: explain names the training shapes that vote and a named
    config's share of it; the model alone has none."""
    from rooftune.roofline.releases import load_residual
    from rooftune.hwprofiles import load_profile
    from rooftune.candidates import GemmShape

    config = "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,SPLIT_K=1,TMA=1,PERSISTENT=0,FIXUP=0,BLOCK_N2=0,num_warps=8,num_stages=3"
    result = runner.invoke(app, ["explain", "gemm", "--shape", "4096x4096x4096", "--top", "3", "--config", config])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    table = load_residual("gemm", load_profile("h200"), "3.6.0").neighbours
    nearest = [str(n.shape) for n in table.nearest_to(GemmShape(4096, 4096, 4096), load_profile("h200"))]
    assert f"nearest training shapes; weight {table.settings.w_search:g} in the search" in text
    assert ", ".join(nearest) in text and "neighbour vote" in text and "in the search, ×" in text
    assert "pick (miss " in text  # the named config's share of the vote (a table cell: it wraps)
    alone = runner.invoke(app, ["explain", "gemm", "--shape", "4096x4096x4096", "--residual", "none"])
    assert alone.exit_code == 0 and "neighbour vote" not in alone.output


def test_explain_fills_in_what_the_shape_leaves_one_value_and_asks_for_the_rest():
    # M = 8 with SPLIT_K 4: split-K sums in the GEMM kernel there, and no persistent tiles
    decode = runner.invoke(app, ["explain", "gemm", "--shape", "8x4096x4096", "--layout", "nk", "--config",
                                 "BLOCK_M=16,BLOCK_N=64,BLOCK_K=128,GROUP_M=1,SPLIT_K=4,TMA=1,num_warps=4,num_stages=4"])
    text = " ".join(decode.output.split())
    assert decode.exit_code == 0, decode.output
    assert "filled in from the shape's legal configs: PERSISTENT=0, FIXUP=1" in text and "named config: rank" in text
    # 4096³: PERSISTENT may be 0 or 1, so it must be named
    big = runner.invoke(app, ["explain", "gemm", "--shape", "4096x4096x4096", "--config",
                              "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,SPLIT_K=1,TMA=1,num_warps=8,num_stages=4"])
    text = " ".join(big.output.split())
    assert big.exit_code == 2 and "missing parameter(s) PERSISTENT, FIXUP, BLOCK_N2" in text
    assert "PERSISTENT=0, FIXUP=0, BLOCK_N2=0; PERSISTENT=1, FIXUP=0, BLOCK_N2=0" in text
    # nothing legal matches the rest (a 256-row tile for M = 8)
    none = runner.invoke(app, ["explain", "gemm", "--shape", "8x4096x4096", "--config",
                               "BLOCK_M=256,BLOCK_N=64,BLOCK_K=128,GROUP_M=1,SPLIT_K=1,TMA=1,num_warps=4,num_stages=4"])
    assert none.exit_code == 2 and "no legal config" in " ".join(none.output.split())


def test_explain_gemm_layout_and_gpu():
    result = runner.invoke(app, ["explain", "gemm", "--shape", "1x4096x4096", "--gpu", "a100_sxm4_80gb",
                                 "--layout", "nk"])
    assert result.exit_code == 0, result.output
    assert "A100" in result.output
    # the legal count is the A100's for this shape and layout, not the H200's default
    from rooftune.candidates import GEMM_SPACE, GemmShape, legal_configs
    from rooftune.hwprofiles import load_profile

    shape = GemmShape(1, 4096, 4096, layout="nk")
    a100 = len(legal_configs(GEMM_SPACE, shape, load_profile("a100_sxm4_80gb")))
    assert a100 != len(legal_configs(GEMM_SPACE, shape, load_profile("h200")))
    assert f"of {a100} legal configs" in " ".join(result.output.split())


def test_explain_attention():
    result = runner.invoke(app, ["explain", "attention", "--shape", "2x32x4096x128", "--top", "2"])
    assert result.exit_code == 0, result.output
    assert "top 2 of" in result.output


def test_explain_moe_ranks_both_gemms_and_says_what_the_routing_makes_of_the_tiles():
    config = "BLOCK_SIZE_M=16,BLOCK_SIZE_N=64,BLOCK_SIZE_K=128,GROUP_SIZE_M=1,num_warps=4,num_stages=3"
    result = runner.invoke(app, ["explain", "moe", "--shape", "128x8x2048x768x64", "--top", "3", "--config", config,
                                 "--residual", "none"], env={"COLUMNS": "200"})
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "moe 128x8x2048x768x64 gate_up on NVIDIA H200: top 3 of 952 legal configs; model alone" in text
    assert "named config: rank" in text and "16x256x64 gm1 w4 s4" in text  # the model's best
    assert "512 routed rows over 126 of 128 experts (mean 4.0, most 11)" in text
    for term in ("row_efficiency", "empty_programs", "weight_bytes", "indirection_us", "cp.async, gathered rows"):
        assert term in text, term
    down = runner.invoke(app, ["explain", "moe", "--shape", "8x2x4096x14336x4096", "--gemm", "down", "--top", "2"])
    text = " ".join(down.output.split())
    assert down.exit_code == 0 and "8x2x4096x14336x4096 down" in text and "8 of 8 experts" in text
    bad = runner.invoke(app, ["explain", "moe", "--shape", "128x8x2048x768x64", "--gemm", "up"])
    assert bad.exit_code == 2 and "MoE gemm must be one of" in " ".join(bad.output.split())
    assert runner.invoke(app, ["explain", "moe", "--shape", "8x9x2048x768x64"]).exit_code == 2  # topk > experts


def test_explain_errors_are_clear():
    bad_shape = runner.invoke(app, ["explain", "gemm", "--shape", "4096x0x4096"])
    assert bad_shape.exit_code == 2 and "error" in bad_shape.output
    bad_config = runner.invoke(app, ["explain", "gemm", "--shape", "64x64x64", "--config", "BLOCK_M=64"])
    assert bad_config.exit_code == 2 and "error" in bad_config.output
    bad_gpu = runner.invoke(app, ["explain", "gemm", "--shape", "64x64x64", "--gpu", "nosuchgpu"])
    assert bad_gpu.exit_code == 2


def test_eval_gemm_json(tmp_path):
    data = tmp_path / "gemm_probe.csv.gz"
    with gzip.open(data, "wt") as f:
        f.write(PROBE)
    out = tmp_path / "summary.json"
    result = runner.invoke(app, ["eval", "gemm", "--data", str(data), "--budget", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    assert summary["n_shapes"] == 1 and summary["budget"] == 1
    # no residual: not our space; tpe and nvmmh where their extras are installed (tests/tuner/test_external.py)
    assert set(summary["methods"]) - {"tpe", "nvmmh"} == {"rooftune", "model", "random", "tutorial"}
    for method in summary["methods"].values():
        assert set(method) == {"mean", "p10", "worst_decile_mean", "runs"}
    assert summary["methods"]["random"]["runs"] == 10 and summary["methods"]["model"]["runs"] == 1
    assert summary["methods"]["model"]["mean"] == 1.0
    assert summary["methods"]["tutorial"]["mean"] == 1.0
    assert "spearman" in summary


def test_eval_gemm_bad_data(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    result = runner.invoke(app, ["eval", "gemm", "--data", str(junk), "--budget", "5"])
    assert result.exit_code == 2 and "recognised dataset" in " ".join(result.output.split())


# The static list's configs (its first, 64x32 s2 w4, fastest), a slow config outside it, an SDPA row.
ATTENTION_PROBE = "B,H,S,D,BM,BN,stages,warps,rev,us,err\n2,8,1024,64,sdpa_flash,,,,,30.0,\n" + "".join(
    f"2,8,1024,64,{bm},{bn},{s},{w},0,{40.0 + i},\n" for i, (bm, bn, s, w) in enumerate(STATIC_ATTENTION)
) + "2,8,1024,64,32,16,1,8,1,400.0,\n2,8,1024,64,256,128,5,8,0,,OutOfResources\n"


def test_eval_attention_json(tmp_path):
    (tmp_path / "attention_probe.csv.gz").write_bytes(gzip.compress(ATTENTION_PROBE.encode()))
    out = tmp_path / "summary.json"
    result = runner.invoke(app, ["eval", "attention", "--data", str(tmp_path), "--budget", "1", "--gpu", "h200",
                                 "--json", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    assert summary["n_shapes"] == 1 and summary["budget"] == 1
    assert set(summary["methods"]) == {"rooftune", "model", "random", "static"}
    assert summary["methods"]["static"]["mean"] == 1.0
    assert 0 < summary["methods"]["model"]["mean"] <= 1.0
    assert "spearman" in summary


def test_eval_attention_needs_attention_shapes(tmp_path):
    data = tmp_path / "gemm_probe.csv.gz"
    data.write_bytes(gzip.compress(PROBE.encode()))
    result = runner.invoke(app, ["eval", "attention", "--data", str(data), "--budget", "5"])
    assert result.exit_code == 2 and "no attention shapes" in " ".join(result.output.split())


def test_explain_shows_the_residual_and_ranks_by_it(shipped_triton):
    config = "BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,SPLIT_K=1,TMA=1,PERSISTENT=0,FIXUP=0,BLOCK_N2=0,num_warps=4,num_stages=3"
    args = ["explain", "gemm", "--shape", "256x10240x8192", "--layout", "nk", "--top", "3", "--config", config]
    with_residual = runner.invoke(app, args)
    alone = runner.invoke(app, args + ["--residual", "none"])
    assert with_residual.exit_code == 0 and alone.exit_code == 0, with_residual.output + alone.output
    text = " ".join(with_residual.output.split())
    assert "model × residual fitted on" in text and "residual factor" in text and "residual: " in text
    assert "model alone (no residual)" in " ".join(alone.output.split()) and "residual factor" not in alone.output
    rank = [int(r.output.split("named config: rank ")[1].split()[0]) for r in (with_residual, alone)]
    assert rank[0] != rank[1]  # the residual moves this config


def test_explain_fits_80_columns_and_shows_everything_when_wide(shipped_triton):
    narrow = runner.invoke(app, ["explain", "gemm", "--shape", "4096x4096x4096", "--top", "3"], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0 and max(len(line) for line in narrow.output.splitlines()) <= 80, narrow.output
    assert "resid ×" in narrow.output and "wave eff" not in narrow.output
    wide = runner.invoke(app, ["explain", "gemm", "--shape", "4096x4096x4096", "--top", "3"], env={"COLUMNS": "160"})
    assert wide.exit_code == 0 and "wave eff" in wide.output and "wgmma" in wide.output
