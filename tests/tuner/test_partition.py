"""The H200 split to 66 SMs as a second device: its probed profile, the full chip's residuals checked on its train
subset (never its held-out), and `transfer` (the full chip's table copied onto it) in `rooftune eval`."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooftune.candidates import Config, GemmShape, Trial
from rooftune.candidates.records import ShapeRecords
from rooftune.hwprofiles import load_profile
from rooftune.hwprofiles.hwprobe import granted_sms
from rooftune.roofline.releases import load_residual, shipped_residual_path
from rooftune.roofline.residual import read_residual
from rooftune.candidates import kernel_spec
from rooftune.tuner.residual_choice import residual_choice
from rooftune.tuner.cli.app import app
from rooftune.tuner.search.transfer import TransferError, best_table, check_covers, transfer

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2] / "datasets"
PART = ROOT / "h200-sm66"
FULL, SM66 = load_profile("h200"), load_profile("h200-sm66")


def _out(result) -> str:
    return " ".join(result.output.split())


def test_the_partition_profile_is_probed_inside_the_partition_that_sms_66_gets():
    # `--sms 66` names it; the driver grants whole groups of 8 SMs on the H200, 72 (hwprobe.granted_sms)
    assert SM66.sm_count == granted_sms(66, SM66.compute_capability) == 72 and SM66.name == "h200-sm66"
    assert "asked for 66 SMs" in SM66.sources["sm_count"]
    # the same SMs, fewer of them: per-SM limits as the full chip's, throughput about halved
    assert SM66.smem_per_block_bytes == FULL.smem_per_block_bytes and SM66.regs_per_sm == FULL.regs_per_sm
    assert 0.5 < SM66.bf16_tflops / FULL.bf16_tflops < 0.7 and SM66.dram_bw_gbps < FULL.dram_bw_gbps


@pytest.mark.parametrize("kernel", ["gemm", "attention"])
def test_the_partition_uses_the_full_chips_residual_as_checked_on_its_train_subset(kernel, shipped_triton):
    residual, full = load_residual(kernel, SM66, "3.6.0"), load_residual(kernel, FULL, "3.6.0")
    assert residual.coefficients == full.coefficients and residual.profile == FULL.name
    assert residual.neighbours is None and full.neighbours is not None  # the vote's regrets are the full chip's
    check = residual.fit["gpu_checks"]["h200-sm66"]
    assert check["ranks_well"] and check["data"].endswith(f"h200-sm66/{kernel}/train")
    chosen, note = residual_choice(kernel_spec(kernel), SM66, "3.6.0")
    assert chosen is not None and "residual" in note


@pytest.fixture
def part_train(tmp_path):
    data = tmp_path / "train"
    shutil.copytree(PART / "gemm" / "train", data)
    return data


def test_fit_check_of_another_gpus_residual_writes_it_for_this_gpu(part_train, tmp_path):
    out = tmp_path / "gemm-sm66.json"
    result = runner.invoke(app, ["fit", "gemm", "--data", str(part_train), "--gpu", "h200-sm66", "--check",
                                 str(shipped_residual_path("gemm", FULL, "3.6")),
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "checked on h200-sm66, ranks for it" in _out(result)
    written = read_residual(out)
    assert written.fit["gpu_checks"]["h200-sm66"]["ranks_well"] is True
    assert written.tritons == load_residual("gemm", FULL, "3.6.0").tritons  # a GPU check adds no Triton release


def test_fit_check_on_another_gpu_refuses_a_misranking_residual(part_train, tmp_path):
    full = shipped_residual_path("gemm", FULL, "3.6")
    data = json.loads(full.read_text())
    data["coefficients"] = {k: -40 * v for k, v in data["coefficients"].items()}
    data["pick"], data["fit"]["vote"] = {}, None  # (its neighbour vote was measured against other coefficients)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    out = tmp_path / "x.json"
    result = runner.invoke(app, ["fit", "gemm", "--data", str(part_train), "--gpu", "h200-sm66", "--check", str(bad),
                                 "--out", str(out)])
    assert result.exit_code == 1 and "on h200-sm66 the residual ranks worse" in _out(result) and not out.exists()


def test_fit_check_refuses_the_partitions_held_out_data(tmp_path):
    result = runner.invoke(app, ["fit", "gemm", "--data", str(PART / "gemm" / "heldout"), "--gpu", "h200-sm66",
                                 "--check", "shipped", "--out", str(tmp_path / "x.json")])
    assert result.exit_code == 2 and "held-out" in _out(result) and not (tmp_path / "x.json").exists()


SHAPE = GemmShape(64, 256, 256)
A = Config.make(4, 3, BLOCK_M=64, BLOCK_N=64)
B = Config.make(4, 3, BLOCK_M=64, BLOCK_N=128)


def test_best_table_is_each_shapes_fastest_successful_candidate():
    records = ShapeRecords(SHAPE, (Trial(A, 5.0), Trial(B, None, error="check: wrong"), Trial(Config.make(8, 3), 1.0)),
                           candidates=(A, B))
    assert best_table([records]) == {SHAPE: A}  # the faster config is outside the space; B failed
    assert best_table([ShapeRecords(SHAPE, (Trial(A, None, error="x"),))]) == {}


def test_transfer_measures_the_tables_config_or_its_nearest_legal_twin():
    seen = []

    def measure(configs):
        seen.append(list(configs))
        return [Trial(c, 1.0) for c in configs]

    strategy = transfer({SHAPE: B})
    assert [t.config for t in strategy(SHAPE, [A, B], measure, 20, FULL)] == [B]
    assert [t.config for t in strategy(SHAPE, [A], measure, 20, FULL)] == [A]  # B illegal here: its nearest
    with pytest.raises(TransferError):
        strategy(GemmShape(1, 64, 64), [A], measure, 20, FULL)
    with pytest.raises(TransferError, match="1 of the 1 shapes"):
        check_covers({}, [ShapeRecords(SHAPE, (Trial(A, 1.0),))], "src")


def test_eval_scores_transfer_from_the_full_chips_data(tmp_path):
    source = tmp_path / "full.json"
    result = runner.invoke(app, ["eval", "gemm", "--data", str(PART / "gemm" / "train"), "--budget", "1",
                                 "--gpu", "h200-sm66", "--transfer-from", str(ROOT / "h200" / "gemm" / "train"),
                                 "--methods", "rooftune,transfer", "--json", str(source)])
    assert result.exit_code == 0, result.output
    summary = json.loads(source.read_text())
    assert summary["n_shapes"] == 24 and 0.5 < summary["methods"]["transfer"]["mean"] < 1.0
    missing = runner.invoke(app, ["eval", "gemm", "--data", str(PART / "gemm" / "train"), "--budget", "1",
                                  "--gpu", "h200-sm66", "--transfer-from", str(PART / "attention" / "train")])
    assert missing.exit_code == 2 and "transfer needs a dataset of the same shapes" in _out(missing)


@pytest.mark.slow  # reads the full chip's training set besides the partition's held-out: 6-15 s
def test_replay_offers_only_what_a_live_tune_on_the_profile_would():
    """The partition's held-out GEMM data were swept under the 66-SM profile's legality; replay under the corrected
    72-SM profile leaves out each config that profile makes illegal (as `tune` there does) and keeps the rest in
    recorded order, while records of another space stay whole; the full chip's data lose nothing."""
    from dataclasses import replace

    from rooftune.candidates import GEMM_SPACE, legal_configs
    from rooftune.eval.datasets.readers import load_records
    from rooftune.tuner.evaluation import offered_as_live

    records = load_records(PART / "gemm" / "heldout", kernel="gemm")
    offer = offered_as_live(records, GEMM_SPACE, SM66)
    assert offer.not_legal == 202 and offer.shapes_cut == 6  # as docs/results.md and the card say
    cut = [(b, a) for b, a in zip(records, offer.records) if a is not b]
    assert len(cut) == 6
    for before, after in cut:
        legal = set(legal_configs(GEMM_SPACE, before.shape, SM66).configs)
        assert after.candidate_configs() == [c for c in before.candidate_configs() if c in legal]
        assert after.best_candidate_us == before.best_candidate_us  # none of them is a shape's best
    foreign = [replace(r, meta={**r.meta, "space_version": "another"}) for r in records[:5]]
    assert offered_as_live(foreign, GEMM_SPACE, SM66).records == foreign
    full = load_records(ROOT / "h200" / "gemm" / "train", kernel="gemm")
    assert offered_as_live(full, GEMM_SPACE, FULL).not_legal == 0


def test_eval_says_how_many_recorded_configs_the_profile_leaves_out():
    result = runner.invoke(app, ["eval", "gemm", "--data", str(PART / "gemm" / "heldout"), "--budget", "1",
                                 "--gpu", "h200-sm66", "--methods", "model"])
    assert result.exit_code == 0, result.output
    assert "202 recorded configs of 6 shapes are not legal on h200-sm66: replay leaves them out" in _out(result)
