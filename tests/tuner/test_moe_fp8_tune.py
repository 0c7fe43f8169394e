"""`tune moe --dtype fp8_w8a8 [--block-shape 128,128]` on the CPU: the family and table names the weights' dtype
picks (candidates/families.py `layer_family`), the CLI's options and errors, a table tuned through a synthetic
measurer (the bf16 path's code, on the FP8 family's space), vLLM's stored FP8 H200 tables, and `eval moe-fp8`'s vLLM
methods and layer scores on a tiny recorded dataset. A GPU test tunes one live FP8 table and checks its entries."""

import contextlib
import json

import pytest
from typer.testing import CliRunner

from rooftune.candidates import MOE_FP8_SPACE, MoeFp8Shape, MoeShape, ShapeError, check_in_grid, kernel_of
from rooftune.candidates import config_legality, legal_configs
from rooftune.candidates.families import KERNELS, TableDtype, layer_family, table_dtype_of
from rooftune.eval.datasets.format import write_manifest, write_shape
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.replay import RecordedMeasurer
from rooftune.hwprofiles import load_profile
from rooftune.tuner.cli.app import app
from rooftune.tuner.llm.moe_tables import (
    SHIPPED_FP8_H200,
    TableError,
    layer_table_name,
    lookup,
    read_table,
    shipped_tables,
)
from rooftune.tuner.llm.moe_tune import moe_shapes, planned_tables, tune_moe_table
from rooftune.tuner.search.vllm import unavailable_vllm_methods, vllm_config, vllm_shipped
from rooftune.tuner.tune import tune

runner = CliRunner()
PROFILE = load_profile("h200")
BLOCK = TableDtype("fp8_w8a8", "fp8_w8a8", (128, 128), (("quant", "block"),))
W8A8 = TableDtype("fp8_w8a8", "fp8_w8a8", None, (("quant", "w8a8"),))
LAYER = (8, 2, 1024, 512)  # experts, topk, hidden, intermediate: small, whole 128-blocks
QWEN235_TP4 = (128, 8, 4096, 384)  # vLLM ships E=128,N=384,...,dtype=fp8_w8a8,block_shape=[128,128].json
NAME = "E=8,N=512,device_name=NVIDIA_H200,dtype=fp8_w8a8"


class SyntheticMeasurer:
    """Any shape 'measured' as tests/tuner/conftest.py's synthetic records; every batch kept."""

    def __init__(self, synthetic):
        self.synthetic, self.recorded, self.batches = synthetic, {}, []

    def measure(self, shape, configs):
        self.batches.append((shape, list(configs)))
        if shape not in self.recorded:
            self.recorded[shape] = RecordedMeasurer(self.synthetic(shape, PROFILE))
        return self.recorded[shape].measure(shape, configs)

    def baseline_us(self):
        return 50.0


def test_the_weights_dtype_picks_the_family_and_its_shape_options():
    assert layer_family() == (KERNELS["moe"], TableDtype("bf16", options=(("dtype", "bf16"),)))
    assert layer_family("fp8_w8a8") == (KERNELS["moe-fp8"], W8A8)
    assert layer_family("fp8_w8a8", (128, 128)) == layer_family(None, (128, 128)) == (KERNELS["moe-fp8"], BLOCK)
    shapes = moe_shapes(*LAYER, 16, "both", "fp8_w8a8", (128, 128))
    assert shapes == {g: MoeFp8Shape(*LAYER, 16, gemm=g, quant="block") for g in ("gate_up", "down")}
    assert moe_shapes(*LAYER, 16, "down", "fp8_w8a8") == {"down": MoeFp8Shape(*LAYER, 16, gemm="down")}
    assert moe_shapes(*LAYER, 16, "gate_up", "fp16") == {"gate_up": MoeShape(*LAYER, 16, dtype="fp16")}
    assert table_dtype_of(shapes["down"]) == BLOCK and table_dtype_of(MoeShape(*LAYER, 1)).label == "bf16"
    assert BLOCK.label == "fp8_w8a8,block_shape=[128,128]"


@pytest.mark.parametrize("dtype, block, words", [
    ("int8_w8a16", None, "--dtype must be one of bf16, fp16, fp8_w8a8, got 'int8_w8a16'"),
    ("bf16", (128, 128), "bf16 weights have no scale blocks"),
    ("fp8_w8a8", (64, 128), "--block-shape 64,128: fp8_w8a8 layers are tuned with per-tensor scales"),
    ("fp8_w8a8", (128, 64), "or --block-shape 128,128"),
    (None, (64, 64), "--block-shape 64,64: no tuned dtype takes that weight-scale block"),
])
def test_a_dtype_or_block_shape_the_spaces_do_not_tune_is_refused(dtype, block, words):
    with pytest.raises(ShapeError) as info:
        layer_family(dtype, block)
    assert words in str(info.value)


def test_table_names_are_vllms_for_both_scale_layouts_and_the_down_table():
    assert layer_table_name(8, 512, "NVIDIA H200", W8A8) == NAME + ".json"
    assert layer_table_name(8, 512, "NVIDIA H200", BLOCK) == NAME + ",block_shape=[128,128].json"
    assert layer_table_name(8, 512, "NVIDIA H200", BLOCK, down=True) == NAME + ",block_shape=[128,128]_down.json"
    assert layer_table_name(8, 512, "NVIDIA H200", W8A8, down=True) == NAME + "_down.json"
    assert layer_table_name(8, 512, "NVIDIA H200", layer_family("bf16")[1]) == "E=8,N=512,device_name=NVIDIA_H200.json"


def run(measurer, gemm="both", tokens=(1, 16, 256), **kw):
    return tune_moe_table(*LAYER, list(tokens), PROFILE, 6, gemm=gemm, residual=None, dtype="fp8_w8a8",
                          measurer_for=lambda kernel: contextlib.nullcontext(measurer), **kw)


def test_an_fp8_block_table_tunes_on_the_fp8_space_and_keeps_its_block_rule(synthetic):
    measurer = SyntheticMeasurer(synthetic)
    opened = []
    tuned = tune_moe_table(*LAYER, [1, 16, 256], PROFILE, 6, residual=None, dtype="fp8_w8a8", block_shape=(128, 128),
                           measurer_for=lambda kernel: opened.append(kernel) or contextlib.nullcontext(measurer))
    assert opened == ["moe-fp8"] and not tuned.missing and sorted(tuned.table()) == [1, 16, 256]
    assert tuned.file_name == NAME + ",block_shape=[128,128].json"
    assert {s for s, _ in measurer.batches} <= {MoeFp8Shape(*LAYER, m, gemm=g, quant="block")
                                               for m in (1, 16, 256) for g in ("gate_up", "down")}
    for e in tuned.entries:
        assert e.config["BLOCK_SIZE_N"] % 128 == 0 and e.config["BLOCK_SIZE_K"] == 128  # the block rule
        for g, result in e.tunes.items():
            shape = MoeFp8Shape(*LAYER, e.tokens, gemm=g, quant="block")
            assert result.kernel == "moe-fp8" and result.space_version == MOE_FP8_SPACE.version
            assert kernel_of(shape).twin(shape, e.config) in legal_configs(MOE_FP8_SPACE, shape, PROFILE).configs
            assert e.times_us[g] == measurer.recorded[shape].records.lookup()[result.winner].time_us


def test_split_fp8_tables_share_block_size_m_and_carry_vllms_names(synthetic, tmp_path):
    tuned = run(SyntheticMeasurer(synthetic), "split")
    assert tuned.file_names == {"up": NAME + ".json", "down": NAME + "_down.json"}
    up, down = tuned.table(), tuned.down_table()
    assert sorted(up) == sorted(down) and all(up[m]["BLOCK_SIZE_M"] == down[m]["BLOCK_SIZE_M"] for m in up)
    paths = planned_tables(tmp_path, 8, 512, "NVIDIA H200", "split", "sglang", "3.6.0", W8A8)
    folder = tmp_path / "configs" / "triton_3_6_0"
    assert paths == {"up": folder / (NAME + ".json"), "down": folder / (NAME + "_down.json")}


def test_a_cached_fp8_table_needs_no_measurer(synthetic, tmp_path):
    cache = tmp_path / "c.json"
    for gemm in ("both", "split"):
        first = run(SyntheticMeasurer(synthetic), gemm, (1, 16), cache=cache, block_shape=(128, 128))
        again = run(None, gemm, (1, 16), cache=cache, block_shape=(128, 128))  # no measurer: all from the cache
        assert (first.tuned, again.tuned, again.cached) == (4, 0, 4)
        assert again.table() == first.table() and again.down_table() == first.down_table()


def _fake_gpu(monkeypatch, measurer):
    from rooftune.hwprofiles import hwprobe
    from rooftune.kernels.harness import live

    kernels = []
    monkeypatch.setattr(hwprobe, "require_cuda", lambda: None)
    monkeypatch.setattr(live, "live_measurer",
                        lambda kernel, profile, **kw: kernels.append(kernel) or contextlib.nullcontext(measurer))
    return kernels


BASE = ["tune", "moe", "--experts", "8", "--topk", "2", "--hidden", "1024", "--intermediate", "1024", "--tp", "2",
        "--batch", "1,16", "--budget", "4", "--gpu", "h200", "--cache", "none"]


def test_cli_tune_moe_fp8_block_writes_vllms_fp8_tables(tmp_path, monkeypatch, synthetic):
    kernels = _fake_gpu(monkeypatch, SyntheticMeasurer(synthetic))
    out = tmp_path / "tables"
    result = runner.invoke(app, [*BASE, "--dtype", "fp8_w8a8", "--block-shape", "128,128", "--gemm", "split",
                                 "--out", str(out)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert kernels == ["moe-fp8"]
    text = " ".join(result.output.split())
    assert "N=512, fp8_w8a8,block_shape=[128,128] (split) on NVIDIA H200" in text and "ranked by the model" in text
    up, down = out / (NAME + ",block_shape=[128,128].json"), out / (NAME + ",block_shape=[128,128]_down.json")
    assert sorted(p.name for p in out.iterdir()) == sorted([up.name, down.name])
    data = json.loads(up.read_text())
    assert list(data) == ["triton_version", "1", "16"] and all(v["BLOCK_SIZE_K"] == 128 for k, v in data.items()
                                                                if k != "triton_version")
    assert {m: c["BLOCK_SIZE_M"] for m, c in read_table(up).items()} == \
        {m: c["BLOCK_SIZE_M"] for m, c in read_table(down).items()}


def test_cli_block_shape_implies_fp8_and_per_tensor_names_no_block(tmp_path, monkeypatch, synthetic):
    _fake_gpu(monkeypatch, SyntheticMeasurer(synthetic))
    implied = runner.invoke(app, [*BASE, "--block-shape", "128,128", "--gemm", "gate_up", "--out", str(tmp_path / "b")])
    assert implied.exit_code == 0, implied.output
    assert [p.name for p in (tmp_path / "b").iterdir()] == [NAME + ",block_shape=[128,128].json"]
    w8a8 = runner.invoke(app, [*BASE, "--dtype", "fp8_w8a8", "--gemm", "gate_up", "--out", str(tmp_path / "w")])
    assert w8a8.exit_code == 0, w8a8.output
    assert [p.name for p in (tmp_path / "w").iterdir()] == [NAME + ".json"]


@pytest.mark.parametrize("args, words", [
    (["--block-shape", "128"], "--block-shape must be two positive integers N,K"),
    (["--block-shape", "128,x"], "--block-shape must be two positive integers N,K"),
    (["--block-shape", "64,128"], "no tuned dtype takes that weight-scale block (only 128,128"),
    (["--dtype", "fp8_w8a8", "--block-shape", "64,128"], "--block-shape 64,128: fp8_w8a8 layers are tuned with"),
    (["--dtype", "bf16", "--block-shape", "128,128"], "bf16 weights have no scale blocks"),
    (["--dtype", "int8_w8a16"], "--dtype must be one of bf16, fp16, fp8_w8a8"),
    (["--dtype", "fp8_w8a8", "--block-shape", "128,128", "--tp", "16"], "multiples of 128 (whole 128×128 weight blocks)"),
])
def test_cli_bad_dtype_or_block_shape_exits_2_before_the_gpu(args, words, monkeypatch):
    from rooftune.kernels.harness import live

    monkeypatch.setattr(live, "live_measurer", lambda *a, **kw: pytest.fail("measured"))
    result = runner.invoke(app, [*BASE, *args])  # a repeated option: the last one counts
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split())


def test_cli_without_a_gpu_fails_as_the_bf16_path_does():
    import torch

    if torch.cuda.is_available():
        pytest.skip("checks the no-GPU error")
    result = runner.invoke(app, [*BASE, "--dtype", "fp8_w8a8", "--block-shape", "128,128"])
    assert result.exit_code == 2 and "no CUDA GPU" in result.output


# --- vLLM's stored FP8 H200 tables ----------------------------------------------------------------------------

HELD_OUT = {"E=256,N=256": (256, 8, 7168, 256, "block"), "E=256,N=512": (256, 8, 7168, 512, "block"),
            "E=128,N=384": (128, 8, 4096, 384, "block"), "E=128,N=768": (128, 8, 4096, 768, "block"),
            "E=8,N=14336": (8, 2, 4096, 14336, "w8a8"), "E=8,N=7168": (8, 2, 4096, 7168, "w8a8")}


def test_the_stored_fp8_tables_are_the_held_out_layers_with_their_commits():
    tables = shipped_tables(SHIPPED_FP8_H200)
    stored = json.loads(SHIPPED_FP8_H200.read_text())["tables"]
    for key, (e, topk, h, n, quant) in HELD_OUT.items():
        name = layer_table_name(e, n, "NVIDIA H200", BLOCK if quant == "block" else W8A8)
        assert name.startswith(key + ",") and len(stored[name]["commit"]) == 40
        assert list(tables[name]) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096]
        for config in tables[name].values():
            check_in_grid(MOE_FP8_SPACE, config)  # every shipped config is a point of vLLM's grid
    assert len(tables) == len(HELD_OUT)
    assert tables[NAME.replace("E=8,N=512", "E=8,N=14336") + ".json"][2]["num_warps"] == 8
    assert shipped_tables()[layer_table_name(256, 512, "NVIDIA H200", BLOCK)][4]["BLOCK_SIZE_K"] == 256


def test_vllms_fp8_entries_are_legal_up_to_a_twin_but_the_narrow_block_tiles():
    """Each entry runs on both GEMMs of its layer as a legal config of the FP8 space (its GROUP_SIZE_M and block
    twin), except the block tables' BLOCK_SIZE_N or BLOCK_SIZE_K 64 at a few token counts: tiles that divide the
    128-block, which vLLM's tuner allows since its PR #46642 and the space's block rule (multiples of 128) does not;
    replay times the nearest legal config for them."""
    outside = []
    for name, table in shipped_tables(SHIPPED_FP8_H200).items():
        e, topk, h, n, quant = HELD_OUT[name.split(",device_name")[0]]
        for m, config in table.items():
            for g in ("gate_up", "down"):
                shape = MoeFp8Shape(e, topk, h, n, m, gemm=g, quant=quant)
                if config_legality(MOE_FP8_SPACE, shape, kernel_of(shape).twin(shape, config), PROFILE):
                    assert 64 in (config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]) and quant == "block"
                    outside.append((name.split(",")[:2], m))
    assert len(outside) == 12  # 6 entries (E=256,N=256 at M 1, 4, 16, 3072; N=384 and N=768 at M 1), both GEMMs


def test_vllm_reads_the_table_of_the_shapes_dtype():
    tables = shipped_tables()
    bf16, block = MoeShape(*QWEN235_TP4, 100), MoeFp8Shape(*QWEN235_TP4, 100, quant="block")
    assert vllm_config(bf16, PROFILE, tables) == lookup(tables["E=128,N=384,device_name=NVIDIA_H200.json"], 100)
    assert vllm_config(block, PROFILE, tables) == lookup(
        tables["E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"], 100)
    assert vllm_config(bf16, PROFILE, tables) != vllm_config(block, PROFILE, tables)
    with pytest.raises(TableError, match="default rule for fp8_w8a8 tables is not modelled"):
        vllm_config(MoeFp8Shape(*QWEN235_TP4, 100, quant="w8a8"), PROFILE, tables)  # no per-tensor table stored


def test_the_shipped_method_measures_the_fp8_entry_as_vllm_launches_it(synthetic):
    """E=256,N=512's entry at M = 4 has BLOCK_SIZE_K 256, which vLLM launches as 128: replay times that twin."""
    shape = MoeFp8Shape(256, 8, 7168, 512, 4, quant="block")
    records = synthetic(shape, PROFILE)
    entry = shipped_tables()[layer_table_name(256, 512, "NVIDIA H200", BLOCK)][4]
    result = tune(shape, RecordedMeasurer(records), vllm_shipped(), 20, profile=PROFILE,
                  candidates=records.candidate_configs())
    (trial,) = result.trials
    assert entry["BLOCK_SIZE_K"] == 256 and trial.config["BLOCK_SIZE_K"] == 128
    assert trial.config == kernel_of(shape).twin(shape, entry) and trial.time_us is not None


# --- eval moe-fp8 ---------------------------------------------------------------------------------------------

def _dataset(root, synthetic, layers):
    write_manifest(root, {"kernel": "moe-fp8", "space_version": MOE_FP8_SPACE.version, "gpu_profile": PROFILE.name})
    for layer, quant in layers:
        for m in (1, 64):
            for g in ("gate_up", "down"):
                write_shape(root, synthetic(MoeFp8Shape(*layer, m, gemm=g, quant=quant), PROFILE))
    return root


def test_eval_moe_fp8_scores_vllms_fp8_table_per_shape_and_by_the_layer(tmp_path, synthetic):
    data = _dataset(tmp_path / "fp8", synthetic, [(QWEN235_TP4, "block")])
    out = tmp_path / "summary.json"
    result = runner.invoke(app, ["eval", "moe-fp8", "--data", str(data), "--budget", "8", "--residual", "none",
                                 "--json", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    summary = json.loads(out.read_text())
    assert summary["vllm_tables"] == {"shapes": 4, "of": 4}
    assert {"rooftune", "model", "random", "vllm-shipped"} <= set(summary["methods"])
    assert "vllm-default" not in summary["methods"] and "vllm-default left out" in text
    assert 0 < summary["methods"]["vllm-shipped"]["mean"] <= 1
    label = "E=128,topk=8,H=4096,N=384,fp8_w8a8,block_shape=[128,128]"
    layers = summary["layers"]
    assert list(layers["layers"]) == [label]
    assert set(layers["methods"]) == {"rooftune", "rooftune-split", "vllm-shipped"}
    for method, per_layer in layers["methods"].items():
        assert 0 < per_layer[label]["worst"] <= per_layer[label]["mean"], method


def test_eval_moe_fp8_leaves_vllm_out_where_it_ships_no_table_and_keeps_layouts_apart(tmp_path, synthetic):
    """A per-tensor layer of the same sizes has no stored table: vLLM's methods are left out with why (an error
    where asked for), and its layer is scored apart from the block one."""
    data = _dataset(tmp_path / "fp8", synthetic, [(QWEN235_TP4, "block"), (QWEN235_TP4, "w8a8")])
    missing = unavailable_vllm_methods(load_records(data), PROFILE)
    assert set(missing) == {"vllm-shipped", "vllm-default"} and "for 4 of 8 shapes" in missing["vllm-shipped"].why
    out = tmp_path / "summary.json"
    result = runner.invoke(app, ["eval", "moe-fp8", "--data", str(data), "--budget", "4", "--residual", "none",
                                 "--methods", "model,rooftune", "--json", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert len(json.loads(out.read_text())["layers"]["layers"]) == 2
    asked = runner.invoke(app, ["eval", "moe-fp8", "--data", str(data), "--budget", "4", "--methods", "vllm-shipped"])
    assert asked.exit_code == 2 and "is not stored here" in " ".join(asked.output.split())


@pytest.mark.gpu
def test_a_live_fp8_block_table_on_the_gpu(tmp_path):
    """Qwen3-30B-A3B-FP8's TP2 layer (E=128, N=384, 128×128 blocks), two token counts tuned live with 6 configs a
    GEMM, written under vLLM's FP8 name; each entry then passes the reference check on both GEMMs, as it runs."""
    pytest.importorskip("torch")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from rooftune.kernels.harness.check import check_moe_fp8
    from rooftune.tuner.cli.args import live_gpu
    from rooftune.tuner.llm.moe_tune import write_tables

    profile = live_gpu(None)
    tuned = tune_moe_table(128, 8, 2048, 768, [1, 64], profile, 6, tp=2, dtype="fp8_w8a8", block_shape=(128, 128),
                           cache=tmp_path / "c.json")
    assert sorted(tuned.table()) == [1, 64] and all(e.time_us > 0 and e.baseline_us for e in tuned.entries)
    for e in tuned.entries:
        for g in ("gate_up", "down"):
            shape = MoeFp8Shape(128, 8, 2048, 384, e.tokens, gemm=g, quant="block")
            assert check_moe_fp8(kernel_of(shape).twin(shape, e.config), shape) is None, (e.tokens, g)
    paths = planned_tables(tmp_path / "out", 128, 384, profile.name, "both", table_dtype=tuned.table_dtype)
    (written,) = write_tables(tuned, paths)
    assert written.name.endswith(",dtype=fp8_w8a8,block_shape=[128,128].json")
