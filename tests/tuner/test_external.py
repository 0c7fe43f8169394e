"""The outside-library baselines (tuner/search/external.py): TPE and nvMatmulHeuristics where installed, and
nothing missing or failing where they are not."""

import dataclasses
import gzip
import json
import sys

import pytest
from typer.testing import CliRunner

from rooftune.candidates import AttentionShape, GemmShape
from rooftune.eval.scoring.replay import RecordedMeasurer
from rooftune.hwprofiles import load_profile
from rooftune.tuner.cli.app import app
from rooftune.tuner.evaluation import evaluate
from rooftune.tuner.search.external import (
    external_gemm_methods,
    nvmmh_configs,
    nvmmh_strategy,
    tpe_strategy,
)
from rooftune.tuner.search.methods import gemm_eval_methods

H200 = load_profile("h200")
SHAPE = GemmShape(1024, 2048, 512)


def _run(strategy, records, budget):
    measurer = RecordedMeasurer(records)
    return strategy(records.shape, records.candidate_configs(), lambda cs: measurer.measure(records.shape, cs),
                    budget, H200)


def test_tpe_spends_its_budget_on_distinct_legal_configs(synthetic):
    pytest.importorskip("optuna")
    records = synthetic(SHAPE, H200)
    trials = _run(tpe_strategy(0), records, 15)
    configs = [t.config for t in trials]
    assert len(configs) == len(set(configs)) == 15
    assert set(configs) <= set(records.candidate_configs())
    assert configs == [t.config for t in _run(tpe_strategy(0), records, 15)]  # seeded
    assert configs != [t.config for t in _run(tpe_strategy(1), records, 15)]


def test_tpe_survives_failed_trials(synthetic):
    pytest.importorskip("optuna")
    clean = synthetic(SHAPE, H200)
    failing = set(clean.candidate_configs()[::2])
    trials = _run(tpe_strategy(3), synthetic(SHAPE, H200, failing=failing), 12)
    assert len(trials) == 12 and any(not t.ok for t in trials)


def test_tpe_is_a_method_with_one_run_per_seed(synthetic):
    pytest.importorskip("optuna")
    records = [synthetic(SHAPE, H200)]
    summary = evaluate(records, 5, H200, {"tpe": gemm_eval_methods(records, seeds=range(2))["tpe"]})
    assert summary["methods"]["tpe"]["runs"] == 5 and 0.0 < summary["methods"]["tpe"]["mean"] <= 1.0


def test_eval_gemm_methods_tpe_from_the_cli(tmp_path, synthetic):
    pytest.importorskip("optuna")
    records = synthetic(SHAPE, H200)
    data = tmp_path / "probe.csv.gz"
    with gzip.open(data, "wt") as f:
        f.write("M,N,K,BM,BN,BK,stages,warps,GM,us,err\n" + "".join(
            f"{SHAPE.m},{SHAPE.n},{SHAPE.k},{t.config['BLOCK_M']},{t.config['BLOCK_N']},{t.config['BLOCK_K']},"
            f"{t.config.num_stages},{t.config.num_warps},{t.config['GROUP_M']},{t.time_us},\n"
            for t in records.trials if t.config["SPLIT_K"] == 1))
    out = tmp_path / "summary.json"
    result = CliRunner().invoke(app, ["eval", "gemm", "--data", str(data), "--budget", "3", "--methods", "model,tpe",
                                      "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["methods"]["tpe"]["runs"] == 5


def test_without_the_extras_the_methods_are_absent_and_nothing_fails(monkeypatch, synthetic, tmp_path):
    monkeypatch.setitem(sys.modules, "optuna", None)  # `import optuna` raises ImportError
    monkeypatch.setitem(sys.modules, "nvMatmulHeuristics", None)
    assert external_gemm_methods() == {}
    records = [synthetic(SHAPE, H200)]
    methods = gemm_eval_methods(records, seeds=range(2))
    assert "tpe" not in methods and "nvmmh" not in methods
    assert evaluate(records, 2, H200, methods)["methods"]["model"]["runs"] == 1
    data = tmp_path / "probe.csv.gz"
    with gzip.open(data, "wt") as f:
        f.write("M,N,K,BM,BN,BK,stages,warps,GM,us,err\n1024,2048,512,128,128,64,3,4,8,50.0,\n")
    result = CliRunner().invoke(app, ["eval", "gemm", "--data", str(data), "--budget", "1", "--methods", "tpe"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "--methods tpe: Optuna is not installed" in text and 'pip install -e ".[tpe]"' in text


def test_nvmmh_on_a_gpu_it_does_not_know_is_left_out_with_a_note_or_refused_by_name(monkeypatch, tmp_path):
    """nvMatmulHeuristics installed, the profile one it has no predefined GPU for (an SM partition, a hwprobe JSON):
    its ValueError killed the whole eval. It is left out with a note, and asked for by name it is an error."""
    import rooftune.tuner.search.external as external

    monkeypatch.setattr(external, "importable", lambda module: module == "nvMatmulHeuristics")
    data = tmp_path / "probe.csv.gz"
    with gzip.open(data, "wt") as f:
        f.write("M,N,K,BM,BN,BK,stages,warps,GM,us,err\n1024,2048,512,128,128,64,3,4,8,50.0,\n")
    result = CliRunner().invoke(app, ["eval", "gemm", "--data", str(data), "--budget", "1", "--gpu", "h200-sm66"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "nvmmh left out: nvMatmulHeuristics has no predefined GPU for h200-sm66" in text
    asked = CliRunner().invoke(app, ["eval", "gemm", "--data", str(data), "--budget", "1", "--gpu", "h200-sm66",
                                     "--methods", "model,nvmmh"])
    text = " ".join(asked.output.split())
    assert asked.exit_code == 2 and "--methods nvmmh: nvMatmulHeuristics has no predefined GPU" in text
    assert "Traceback" not in text
    assert "nvmmh" in external_gemm_methods(profile=H200)
    assert "nvmmh" not in external_gemm_methods(profile=load_profile("h200-sm66"))


def test_nvmmh_proposals_map_into_the_space(synthetic):
    pytest.importorskip("nvMatmulHeuristics")
    names = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K"]
    proposed = nvmmh_configs(GemmShape(4096, 4096, 4096), H200, names)
    assert proposed and all(c["BLOCK_M"] >= 16 and c.num_warps >= 1 for c in proposed)
    records = synthetic(SHAPE, H200)
    trials = _run(nvmmh_strategy, records, 20)
    configs = [t.config for t in trials]
    assert 0 < len(configs) == len(set(configs)) <= 20 and set(configs) <= set(records.candidate_configs())
    with pytest.raises(ValueError, match="no predefined GPU"):
        nvmmh_configs(SHAPE, dataclasses.replace(H200, name="Some GPU"), names)


def test_nvmmh_is_a_gemm_method_only(synthetic):
    from rooftune.candidates import KERNELS, load_implementation

    records = [synthetic(AttentionShape(1, 8, 1024, 64), H200)]
    for name, spec in KERNELS.items():
        if name != "gemm":  # the strategy knows GEMM shapes only: no other family's eval methods list it
            assert "nvmmh" not in load_implementation(spec.eval_methods)(records), name
