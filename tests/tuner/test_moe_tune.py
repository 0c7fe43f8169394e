"""`tune moe` on the CPU: each token count's entry with a synthetic measurer, the joint search of --gemm both, the
split tables of --gemm split and down (one BLOCK_SIZE_M per M), the cache (resumable, no GPU when all is there),
vLLM's and SGLang's table files, a complete table for every shard, the CLI."""

import contextlib
import json

import pytest
from typer.testing import CliRunner

from rooftune.candidates import MOE_SPACE, MoeShape, ShapeError, legal_configs
from rooftune.candidates.moe_space import group_twin
from rooftune.hwprofiles import load_profile
from rooftune.tuner.cli.app import app
from rooftune.tuner.llm.moe_tables import VLLM_KEYS, read_table
import math

from rooftune.tuner.llm.moe_joint import joint_candidates, joint_prior
from rooftune.tuner.llm.moe_tables import TableError
from rooftune.tuner.llm.moe_tune import planned_tables, tune_moe_table, write_tables

runner = CliRunner()
PROFILE = load_profile("h200")
LAYER = (8, 2, 1024, 512)  # experts, topk, hidden, intermediate: small, so the synthetic records are quick
TOKENS = [1, 16, 256]
BASELINE_US = 50.0


@pytest.fixture
def new_gpu(synthetic_gpu):
    """new_gpu(failing=None): a fresh GPU measuring any shape as tests/tuner/conftest.py's synthetic records, the
    configs `failing(shape)` names failing their check; torch's time fixed; every batch kept."""
    return lambda failing=None: synthetic_gpu(PROFILE, BASELINE_US, failing)


@pytest.fixture
def measurer(new_gpu):
    return new_gpu()


def run(measurer, gemm="both", tokens=TOKENS, cache=None, opened=None, budget=20, residual=None, **kw):
    """The table tuned on synthetic records, ranked by the model alone unless `residual` is given (the shipped
    residual is fitted on real timings, which synthetic records are not)."""
    def factory(kernel):
        if opened is not None:
            opened.append(kernel)
        return contextlib.nullcontext(measurer)

    return tune_moe_table(*LAYER, list(tokens), PROFILE, budget, gemm=gemm, measurer_for=factory, cache=cache,
                          residual=residual, **kw)


def test_gate_up_takes_its_own_winners(measurer):
    tuned = run(measurer, "gate_up")
    assert [e.tokens for e in tuned.entries] == TOKENS and not tuned.missing
    for e in tuned.entries:
        (name, result), = e.tunes.items()
        assert name == "gate_up" and e.config == result.winner and e.times_us == {"gate_up": result.time_us}
        assert len(result.trials) <= 20 and e.baseline_us == BASELINE_US and e.pair_cost is None
    assert tuned.file_name == "E=8,N=512,device_name=NVIDIA_H200.json"


def test_both_serves_each_m_with_the_config_whose_two_times_sum_least(measurer):
    tuned = run(measurer)
    for e in tuned.entries:
        shapes = {g: MoeShape(*LAYER, e.tokens, gemm=g) for g in ("gate_up", "down")}
        # the table's config runs on each GEMM as its GROUP_SIZE_M twin there, a legal config of that GEMM
        twins = {g: group_twin(s, e.config) for g, s in shapes.items()}
        assert all(twins[g] in legal_configs(MOE_SPACE, s, PROFILE).configs for g, s in shapes.items())
        records = {g: measurer.recorded[s].records.lookup() for g, s in shapes.items()}
        assert e.times_us == {g: records[g][twins[g]].time_us for g in shapes}
        # each GEMM times at most `budget` configs in all (the confirming pass re-times some of them), the same
        # configs on both, and no config timed on both sums less than the entry's
        measured = {g: measurer.measured(s) for g, s in shapes.items()}
        assert all(len(m) <= 20 for m in measured.values())
        joint = joint_candidates(shapes, PROFILE)
        timed = [c for c, tw in joint.items() if all(tw[g] in measured[g] for g in shapes)]
        assert len(timed) == len(measured["gate_up"])
        best = min(sum(records[g][joint[c][g]].time_us for g in shapes) for c in timed)
        assert e.time_us == pytest.approx(best)
        assert e.separate_us == {g: min(records[g][c].time_us for c in measured[g]) for g in shapes}
        assert e.pair_cost >= 1 - 1e-12 and e.baseline_us == 2 * BASELINE_US


def test_the_joint_order_is_the_summed_predicted_time(measurer):
    """The prior is log(Σ predicted µs of both GEMMs), and the first round measures its best configs in order."""
    from rooftune.roofline import predict
    from rooftune.candidates import configs_to_columns

    shapes = {g: MoeShape(*LAYER, 256, gemm=g) for g in ("gate_up", "down")}
    joint = joint_candidates(shapes, PROFILE)
    configs, prior = joint_prior(shapes, joint, PROFILE, None)
    assert set(configs) <= set(joint) and len(configs) > 20
    each = {g: predict(s, configs_to_columns([joint[c][g] for c in configs]), PROFILE).time_us
            for g, s in shapes.items()}
    assert prior == pytest.approx([math.log(a + b) for a, b in zip(each["gate_up"], each["down"])])
    run(measurer, tokens=[256])
    first_round = measurer.batches[0][1]
    expected = [configs[i] for i in sorted(range(len(configs)), key=lambda i: prior[i])[:len(first_round)]]
    assert first_round == [joint[c]["gate_up"] for c in expected]


def test_split_shares_block_size_m_per_m_and_names_both_tables(measurer, new_gpu):
    tuned = run(measurer, "split")
    assert tuned.file_names == {"up": "E=8,N=512,device_name=NVIDIA_H200.json",
                                "down": "E=8,N=512,device_name=NVIDIA_H200_down.json"}
    up, down = tuned.table(), tuned.down_table()
    assert sorted(up) == sorted(down) == TOKENS
    for m in TOKENS:
        assert up[m]["BLOCK_SIZE_M"] == down[m]["BLOCK_SIZE_M"]
        down_shape = MoeShape(*LAYER, m, gemm="down")
        assert all(c["BLOCK_SIZE_M"] == up[m]["BLOCK_SIZE_M"] for c in measurer.measured(down_shape))
    # the up table is --gemm gate_up's own, from the same cache entry
    assert up == run(new_gpu(), "gate_up").table()


def test_down_alone_needs_the_up_table_and_keeps_its_block_size_m(measurer):
    with pytest.raises(TableError, match="write the up table first"):
        run(measurer, "down")
    up = {1: MOE_SPACE_CONFIG(16), 16: MOE_SPACE_CONFIG(32), 256: MOE_SPACE_CONFIG(64)}
    with pytest.raises(TableError, match="no entry for M = 256"):
        run(measurer, "down", up_table={m: c for m, c in up.items() if m != 256})
    tuned = run(measurer, "down", up_table=up)
    assert tuned.file_name.endswith("_down.json") and {m: c["BLOCK_SIZE_M"] for m, c in tuned.table().items()} \
        == {1: 16, 16: 32, 256: 64}


def MOE_SPACE_CONFIG(block_m):
    from rooftune.candidates import Config

    return Config.make(4, 3, BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=64, BLOCK_SIZE_K=64, GROUP_SIZE_M=1)


def test_a_shard_of_n_32_gets_a_complete_table(new_gpu):
    """DeepSeek-V3's sizes at --tp 8 (N = 32): every M = 1..48 gets a config legal on both GEMMs."""
    tokens = [1, 2, 4, 8, 16, 24, 32, 48]
    m = new_gpu()
    tuned = tune_moe_table(256, 8, 7168, 256, tokens, PROFILE, 6, tp=8, residual=None,
                           measurer_for=lambda kernel: contextlib.nullcontext(m))
    assert tuned.intermediate == 32 and not tuned.missing and sorted(tuned.table()) == tokens
    for e in tuned.entries:
        for g in ("gate_up", "down"):
            shape = MoeShape(256, 8, 7168, 32, e.tokens, gemm=g)
            assert group_twin(shape, e.config) in legal_configs(MOE_SPACE, shape, PROFILE).configs

def test_a_cached_table_needs_no_measurer_and_a_longer_list_resumes(measurer, new_gpu, tmp_path):
    cache = tmp_path / "c.json"
    first = run(measurer, cache=cache, tokens=TOKENS[:2])
    assert first.tuned == 4 and first.cached == 0  # 2 GEMMs' parts of the joint search × 2 token counts
    opened = []
    again = run(new_gpu(), cache=cache, tokens=TOKENS[:2], opened=opened)
    assert opened == [] and again.tuned == 0 and again.cached == 4
    assert again.table() == first.table() and [e.times_us for e in again.entries] == [e.times_us for e in first.entries]
    fresh = new_gpu()
    more = run(fresh, cache=cache, tokens=TOKENS, opened=opened)
    assert opened == ["moe"] and more.tuned == 2 and more.cached == 4
    assert {s.tokens for s, _ in fresh.batches} == {256}
    # --gemm split reuses --gemm gate_up's tunes: only the down GEMM is measured
    run(new_gpu(), "gate_up", cache=cache)
    split = new_gpu()
    assert run(split, "split", cache=cache).cached == 3 and {s.gemm for s, _ in split.batches} == {"down"}


def test_tensor_parallel_shards_name_the_table_and_must_divide(measurer):
    tuned = run(measurer, "gate_up", tokens=[16], tp=2)
    assert tuned.intermediate == 256 and tuned.file_name == "E=8,N=256,device_name=NVIDIA_H200.json"
    assert next(iter(tuned.entries[0].tunes.values())).shape == MoeShape(8, 2, 1024, 256, 16)
    with pytest.raises(ShapeError, match="divide"):
        run(measurer, tp=3)
    with pytest.raises(ShapeError, match="--gemm"):
        run(measurer, gemm="up")


def test_a_token_count_whose_configs_all_fail_says_so(new_gpu, tmp_path):
    tuned = run(new_gpu(failing=lambda shape: legal_configs(MOE_SPACE, shape, PROFILE).configs if shape.tokens == 16
                        else ()))
    skipped = [(e.tokens, e.skipped) for e in tuned.missing]
    assert len(skipped) == 1 and skipped[0][0] == 16 and "legal on both GEMMs failed" in skipped[0][1]
    assert sorted(tuned.table()) == [1, 256]
    with pytest.raises(TableError, match=r"no table written: no config can serve M=16"):
        write_tables(tuned, {"up": tmp_path / "t.json"})
    assert not (tmp_path / "t.json").exists()


def test_cli_tune_moe_writes_vllms_table(tmp_path, monkeypatch, measurer, live_from):
    from rooftune.hwprofiles import hwprobe
    from rooftune.kernels.harness import live

    live_from(measurer, BASELINE_US)
    out, cache = tmp_path / "tables", tmp_path / "c.json"
    args = ["tune", "moe", "--experts", "8", "--topk", "2", "--hidden", "1024", "--intermediate", "1024", "--tp", "2",
            "--batch", "1,16,256", "--budget", "6", "--gpu", "h200", "--cache", str(cache), "--out", str(out)]
    result = runner.invoke(app, args, env={"COLUMNS": "140"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "E=8, top-k 2, hidden 1024, N=512 (both) on NVIDIA H200: 6 GEMM tunes measured, 0 from the cache" in text
    assert "one config ×" in text and "wrote" in text and "ranked by the model" in text
    path = out / "E=8,N=512,device_name=NVIDIA_H200.json"
    data = json.loads(path.read_text())  # what vLLM's get_moe_configs reads: M keys as strings, the six keys
    assert data.pop("triton_version") == hwprobe.installed_triton()  # vLLM's loader drops it
    assert list(data) == ["1", "16", "256"] and all(list(v) == list(VLLM_KEYS) for v in data.values())
    assert all(type(x) is int for v in data.values() for x in v.values())
    monkeypatch.setattr(live, "live_measurer", lambda kernel, profile, **kw: pytest.fail("cache hit measured"))
    again = runner.invoke(app, [*args[:-4], "--batch", "1", "--gemm", "both", "--cache", str(cache), "--out", str(out)])
    assert again.exit_code == 0 and "0 GEMM tunes measured, 2 from the cache" in " ".join(again.output.split())
    assert list(read_table(path)) == [1, 16, 256]  # merged with what was there


def test_cli_tune_moe_takes_a_residual_choice(tmp_path, measurer, live_from):
    live_from(measurer, BASELINE_US)
    args = ["tune", "moe", "--experts", "8", "--topk", "2", "--hidden", "1024", "--intermediate", "512", "--batch",
            "16", "--gemm", "gate_up", "--budget", "4", "--gpu", "h200", "--cache", "none"]
    result = runner.invoke(app, [*args, "--residual", "none"], env={"COLUMNS": "140"})
    assert result.exit_code == 0, result.output
    assert "ranked by the model alone (--residual none)" in " ".join(result.output.split())
    wrong = runner.invoke(app, [*args, "--residual", str(tmp_path / "missing.json")])
    assert wrong.exit_code == 2 and "missing.json" in " ".join(wrong.output.split())


@pytest.mark.parametrize("args, words", [
    (["--intermediate", "1000", "--tp", "3"], "must be at least 1 and divide the intermediate size 1000"),
    (["--batch", "1,x"], "--batch must be positive integers"),
    (["--gemm", "up"], "--gemm must be one of both, split, gate_up, down"),
    (["--gemm", "down"], "write the up table first"),
    (["--layout", "trt"], "--layout must be one of vllm, sglang"),
    (["--topk", "9"], "topk (9) must be at most experts (8)"),
    (["--budget", "0"], "must be at least 1"),
])
def test_cli_bad_input_exits_2_before_the_gpu(args, words, monkeypatch):
    from rooftune.kernels.harness import live

    monkeypatch.setattr(live, "live_measurer", lambda *a, **kw: pytest.fail("measured"))
    base = {"--experts": "8", "--topk": "2", "--hidden": "1024", "--intermediate": "1024"}
    base.update(dict(zip(args[::2], args[1::2])))
    result = runner.invoke(app, ["tune", "moe", *[x for kv in base.items() for x in kv], "--gpu", "h200",
                                 "--cache", "none"])
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split())


def test_cli_refuses_a_file_that_is_no_table_before_the_gpu(tmp_path, monkeypatch):
    from rooftune.kernels.harness import live

    monkeypatch.setattr(live, "live_measurer", lambda *a, **kw: pytest.fail("measured"))
    (tmp_path / "E=8,N=1024,device_name=NVIDIA_H200.json").write_text("not json")
    result = runner.invoke(app, ["tune", "moe", "--experts", "8", "--topk", "2", "--hidden", "1024", "--intermediate",
                                 "1024", "--gpu", "h200", "--cache", "none", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not a vLLM fused-MoE config table" in " ".join(result.output.split())


@pytest.mark.gpu
def test_a_live_table_on_the_gpu(tmp_path):
    """Two token counts of Qwen3-30B-A3B's TP4 layer, tuned live with 6 configs a GEMM, written as vLLM's table."""
    pytest.importorskip("torch")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from rooftune.tuner.cli.args import live_gpu

    tuned = tune_moe_table(128, 8, 2048, 768, [1, 64], live_gpu(None), 6, tp=4, cache=tmp_path / "c.json")
    assert sorted(tuned.table()) == [1, 64] and all(e.baseline_us for e in tuned.entries)
    assert all(e.time_us > 0 for e in tuned.entries)


@pytest.mark.gpu
def test_a_live_split_table_on_the_gpu(tmp_path):
    """The same layer tuned live as `--gemm split`: an up and a down table, the down entry under the up entry's
    BLOCK_SIZE_M at each token count, both written under their engine names."""
    pytest.importorskip("torch")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from rooftune.tuner.cli.args import live_gpu

    profile = live_gpu(None)
    tuned = tune_moe_table(128, 8, 2048, 768, [1, 64], profile, 6, tp=4, gemm="split", cache=tmp_path / "c.json")
    up, down = tuned.table(), tuned.down_table()
    assert sorted(up) == sorted(down) == [1, 64]
    assert all(up[m]["BLOCK_SIZE_M"] == down[m]["BLOCK_SIZE_M"] for m in up)
    paths = planned_tables(tmp_path / "out", 128, 192, profile.name, "split")
    written = write_tables(tuned, paths)
    assert sorted(p.name.endswith("_down.json") for p in written) == [False, True]


def test_a_table_tunes_with_the_shipped_residual_by_default_and_refuses_a_wrong_one(measurer):
    """`residual` reaches every token count's tune: the shipped one by default, "none" by name; a wrong one is
    refused."""
    shipped, alone = run(measurer, gemm="gate_up", residual="shipped"), run(measurer, gemm="gate_up", residual="none")
    assert len(shipped.entries) == len(alone.entries) == len(TOKENS)
    with pytest.raises(ValueError, match='"shipped", "none", None or a Residual'):
        run(measurer, residual="fitted")


def test_sglang_layout_puts_both_tables_in_its_triton_folder(tmp_path, measurer):
    paths = planned_tables(tmp_path, 8, 512, "NVIDIA H200", "split", "sglang", "3.6.0")
    folder = tmp_path / "configs" / "triton_3_6_0"  # SGLANG_MOE_CONFIG_DIR=tmp_path, as its loader looks them up
    assert paths == {"up": folder / "E=8,N=512,device_name=NVIDIA_H200.json",
                     "down": folder / "E=8,N=512,device_name=NVIDIA_H200_down.json"}
    written = write_tables(run(measurer, "split"), paths, "sglang", "3.6.0")
    assert written == [paths["up"], paths["down"]]
    up, down = (json.loads(p.read_text()) for p in written)
    assert "triton_version" not in up and list(up) == ["1", "16", "256"]  # its loader reads every key as an M
    assert all(up[m]["BLOCK_SIZE_M"] == down[m]["BLOCK_SIZE_M"] for m in up)
    assert planned_tables(tmp_path, 8, 512, "NVIDIA H200", "both") == {"up": tmp_path / paths["up"].name}
    with pytest.raises(TableError, match="names its folder by the Triton release"):
        planned_tables(tmp_path, 8, 512, "NVIDIA H200", "both", "sglang", None)
