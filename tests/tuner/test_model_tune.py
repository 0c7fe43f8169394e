"""`tune model` on the CPU: every shape of a forward pass through `tune_shape` with a synthetic measurer,
the cache, the vLLM-style tables, the report, the CLI."""

import contextlib
import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from rooftune.candidates import GemmShape
from rooftune.hwprofiles import load_profile
from rooftune.tuner.cli.app import app
from rooftune.tuner.llm.shapes import load_model_config
from rooftune.tuner.llm.tables import (
    config_from_vllm,
    report_dict,
    report_markdown,
    table_file_name,
    vllm_tables,
    write_tables,
)
from rooftune.tuner.llm.tune import NO_LEGAL_CONFIG, tune_model

runner = CliRunner()
PROFILE = load_profile("h200")
BASELINE_US = 50.0


@pytest.fixture
def measurer(synthetic_gpu):
    """Any shape 'measured' as tests/tuner/conftest.py's synthetic records; torch's time fixed."""
    return synthetic_gpu(PROFILE, BASELINE_US)


def run(measurer, tokens=(8, 64), cache=None, opened=None):
    def factory(kernel):
        if opened is not None:
            opened.append(kernel)
        return contextlib.nullcontext(measurer)

    return tune_model(load_model_config("qwen2.5-7b"), list(tokens), PROFILE, 3, seq=2048, measurer_for=factory,
                      cache=cache)


def test_every_distinct_shape_is_tuned_once_and_totals_add_up(measurer, tmp_path):
    opened = []
    tuned = run(measurer, cache=tmp_path / "c.json", opened=opened)
    assert opened == ["gemm", "attention"]  # one measurer per kernel
    # 8 tokens: attention over 8 queries runs the smallest query block (64), masked
    assert not [lt for lt in tuned.layers if lt.skipped]
    assert tuned.tuned == len(measurer.shapes) == 12 and tuned.cached == 0
    first, second = tuned.forward_times()
    assert first.tokens == 8 and first.skipped == ()
    rows = [lt for lt in tuned.layers if lt.layer.tokens == 64]
    assert second.rooftune_us == pytest.approx(sum(lt.result.time_us * lt.layer.count for lt in rows))
    assert second.torch_us == pytest.approx(BASELINE_US * (5 * 28 + 1))  # torch's time from the measurer
    assert second.speedup == pytest.approx(second.torch_us / second.rooftune_us)


def test_a_shape_without_a_legal_config_is_skipped_not_fatal(measurer, monkeypatch):
    from rooftune.tuner.llm import tune as model_tune

    real = model_tune.legal_configs
    monkeypatch.setattr(model_tune, "legal_configs", lambda space, shape, profile: real(space, shape, profile)
                        if space.kernel == "gemm" else real(space, shape, replace(profile, smem_per_block_bytes=1024)))
    tuned = run(measurer)
    skipped = [(lt.layer.layer, lt.layer.tokens, lt.skipped) for lt in tuned.layers if lt.skipped]
    assert skipped == [("attention", 8, NO_LEGAL_CONFIG), ("attention", 64, NO_LEGAL_CONFIG)]
    assert tuned.forward_times()[0].skipped == ("attention",)


def test_a_second_run_tunes_nothing(measurer, tmp_path, synthetic_gpu):
    cache = tmp_path / "c.json"
    before = run(measurer, cache=cache)
    opened = []
    again = run(synthetic_gpu(PROFILE, BASELINE_US), cache=cache, opened=opened)
    assert again.tuned == 0 and again.cached == 12 and opened == []  # no measurer even opened
    assert [lt.result.winner for lt in again.layers if lt.result] == [lt.result.winner for lt in before.layers
                                                                      if lt.result]
    assert all(lt.result.cached for lt in again.layers if lt.result)
    more = run(synthetic_gpu(PROFILE, BASELINE_US), tokens=(8, 64, 512), cache=cache, opened=opened)
    assert more.tuned == 6 and more.cached == 12 and opened == ["gemm", "attention"]


def test_the_tables_are_vllms_format(measurer, tmp_path):
    tuned = run(measurer)
    tables = vllm_tables(tuned)
    assert set(tables) == {table_file_name(n, k, "NVIDIA H200") for n, k in
                           ((4608, 3584), (3584, 3584), (37888, 3584), (3584, 18944), (152064, 3584))}
    assert "N=4608,K=3584,device_name=NVIDIA_H200.json" in tables
    table = tables["N=4608,K=3584,device_name=NVIDIA_H200.json"]
    assert list(table) == ["8", "64"]
    keys = {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "SPLIT_K", "num_warps", "num_stages"}
    assert all(set(entry) == keys and all(type(v) is int for v in entry.values()) for entry in table.values())
    winner = next(lt.result.winner for lt in tuned.layers if lt.layer.shape == GemmShape(64, 4608, 3584, "nk"))
    assert config_from_vllm(table["64"], tma=winner["TMA"], persistent=winner["PERSISTENT"],
                            fixup=winner["FIXUP"], block_n2=winner["BLOCK_N2"]) == winner
    assert table_file_name(1, 2, "NVIDIA H100 80GB/HBM3") == "N=1,K=2,device_name=NVIDIA_H100_80GB_HBM3.json"


def test_a_composite_winner_is_written_as_the_fastest_measured_tile_the_format_names():
    from rooftune.candidates import Config, Trial
    from rooftune.tuner.llm.tables import table_config
    from rooftune.tuner.tune import TuneResult

    def cfg(bn, bn2, w=4):
        return Config.make(w, 3, BLOCK_M=128, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=0,
                           FIXUP=0, BLOCK_N2=bn2)

    trials = (Trial(cfg(128, 32), 10.0), Trial(cfg(256, 0, 8), 12.0), Trial(cfg(128, 0), 11.5),
              Trial(cfg(128, 64), None, error="out of resources"))
    shape = GemmShape(2048, 1280, 8192, "nk")
    result = TuneResult(shape, cfg(128, 32), 10.0, trials, "rooftune", "NVIDIA H200", "v")
    assert table_config(result) == cfg(128, 0)  # the fastest one-accumulator trial, not BLOCK_N=128 of the winner
    assert table_config(TuneResult(shape, cfg(256, 0, 8), 12.0, trials[1:], "rooftune", "NVIDIA H200", "v")) \
        == cfg(256, 0, 8)  # a plain winner as it is
    alone = TuneResult(shape, cfg(128, 32), 10.0, trials[:1], "rooftune", "NVIDIA H200", "v")
    assert table_config(alone) == cfg(128, 0)  # nothing else measured: the winner's BLOCK_N part


def test_tables_merge_with_what_is_there(measurer, tmp_path):
    name = "N=3584,K=3584,device_name=NVIDIA_H200.json"
    (tmp_path / name).write_text(json.dumps({"4096": {"BLOCK_SIZE_M": 128}, "8": {"stale": 1}}))
    paths = write_tables(run(measurer), tmp_path)
    assert len(paths) == 5
    data = json.loads((tmp_path / name).read_text())
    assert list(data) == ["8", "64", "4096"] and data["4096"] == {"BLOCK_SIZE_M": 128} and "stale" not in data["8"]


def test_the_report(measurer):
    tuned = run(measurer)
    data = json.loads(json.dumps(report_dict(tuned)))
    assert data["model"] == "qwen2.5-7b" and data["config"]["kv_heads"] == 4 and len(data["layers"]) == 12
    assert [f["tokens"] for f in data["forward"]] == [8, 64] and data["forward"][0]["skipped"] == []
    text = report_markdown(tuned)
    assert "| 64 | **forward** |" in text and "| 8 | **forward** |" in text


def test_cli_tune_model_end_to_end(tmp_path, monkeypatch, measurer, live_from):
    from rooftune.kernels.harness import live

    live_from(measurer, BASELINE_US)
    out, cache = tmp_path / "tables", tmp_path / "c.json"
    args = ["tune", "model", "--config", "qwen2.5-7b", "--batch", "8,64", "--budget", "3", "--cache", str(cache),
            "--out", str(out)]
    result = runner.invoke(app, args, env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "12 shapes tuned, 0 from the cache" in text and "forward" in text and "wrote 5 GEMM tables" in text
    assert (out / "N=37888,K=3584,device_name=NVIDIA_H200.json").exists()
    report = json.loads((out / "qwen2.5-7b.report.json").read_text())
    assert report["forward"][1]["torch_us"] == pytest.approx(BASELINE_US * 141)
    assert (out / "qwen2.5-7b.report.md").read_text().startswith("# qwen2.5-7b on NVIDIA H200")
    monkeypatch.setattr(live, "live_measurer", lambda kernel, profile, **kw: pytest.fail("cache hit measured"))
    result = runner.invoke(app, args, env={"COLUMNS": "100"})
    assert result.exit_code == 0 and "0 shapes tuned, 12 from the cache" in " ".join(result.output.split())


@pytest.mark.parametrize("args, words", [
    (["--config", "gpt-17"], "not a shipped model config"),
    (["--config", "llama-3-8b", "--batch", "8,x"], "--batch must be positive integers"),
    (["--config", "llama-3-8b", "--batch", "3000"], "not whole sequences of 2048"),
    (["--config", "llama-3-8b", "--budget", "0"], "must be at least 1"),
])
def test_cli_bad_input_exits_2_before_the_gpu(args, words, monkeypatch):
    from rooftune.kernels.harness import live

    monkeypatch.setattr(live, "live_measurer", lambda *a, **kw: pytest.fail("measured"))
    result = runner.invoke(app, ["tune", "model", *args, "--cache", "none"])
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split())


# The GEMM residual the committed model tables were tuned with on 2026-12-01 (its digest, which their cache keys
# name): the one shipped before the neighbour vote; the shipped one (with its vote) ranks them otherwise, and tuning
# them again needs an H200 (datasets/h200/models/README.md).
MODEL_TABLES_TUNER = "rooftune:34c6ea4eefb0"


def test_the_committed_model_tables_name_the_committed_tunes():
    """datasets/h200/models/: every GEMM table entry is `table_config` of the cached tune of its shape under the
    shipped space and the residual the tables' card names, so the tables are not stale against the space or the fit
    they claim."""
    from pathlib import Path

    from rooftune.tuner.llm.tables import table_config, vllm_config
    from rooftune.tuner.cache import TuneCache, cache_key

    root = Path(__file__).resolve().parents[2] / "datasets" / "h200" / "models"
    tuned_under = "3.6.0"  # the Triton the committed tables were tuned with (their cache entries record it)
    assert MODEL_TABLES_TUNER.split(":")[1] in (root / "README.md").read_text()
    checked = composite = 0
    for model in ("llama-3-8b", "qwen2.5-7b"):
        tables = sorted((root / model).glob("N=*,K=*,device_name=NVIDIA_H200.json"))
        assert len(tables) == 5
        for table in tables:
            n, k = (int(part.split("=")[1]) for part in table.name.split(",")[:2])
            for m, entry in json.loads(table.read_text()).items():
                shape = GemmShape(int(m), n, k, "nk")
                key = cache_key(shape, PROFILE, 20, tuner=MODEL_TABLES_TUNER, triton=tuned_under)
                result = TuneCache(root / "tune.json").get(key)
                assert result is not None, f"{model} {shape}: no tune of the shipped space and the card's fit in the cache"
                assert entry == vllm_config(table_config(result)), (model, shape)
                assert result.triton == tuned_under
                checked += 1
                composite += bool(result.winner.get("BLOCK_N2"))
    assert checked == 40 and composite == 4  # 4 tokens x 5 GEMMs x 2 models; the README names the 4
