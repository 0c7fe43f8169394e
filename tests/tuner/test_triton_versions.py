"""Results keyed by the Triton they were measured under: the tune cache, the shipped residuals (and
`fit --check`), the datasets' manifests, the autotune cache."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooftune.candidates import kernel_of, parse_gemm_shape
from rooftune.eval.datasets.format import read_dataset, shape_files
from rooftune.hwprofiles import hwprobe, load_profile
from rooftune.roofline.fit import make_residual
from rooftune.roofline import releases
from rooftune.roofline.releases import choose_residual, load_residual, shipped_residual_path
from rooftune.roofline.residual import read_residual, triton_release
from rooftune.tuner import cache, live_tune, residual_choice
from rooftune.tuner.cli.app import app
from rooftune.tuner.pytorch import autotune

runner = CliRunner()
PROFILE = load_profile("h200")
SHAPE = parse_gemm_shape("512x512x512")
TRAIN = Path(__file__).resolve().parents[2] / "datasets" / "h200" / "gemm" / "train"


def _installed(monkeypatch, version):
    for module in (cache, live_tune, residual_choice):
        monkeypatch.setattr(module, "installed_triton", lambda: version)
    monkeypatch.setattr(hwprobe, "installed_triton", lambda: version)


def test_release_is_major_minor():
    assert triton_release("3.6.0") == "3.6" and triton_release("3.10.1+gitabc") == "3.10"


def test_a_cached_tune_from_another_triton_is_tuned_again(synthetic, counting, tmp_path, monkeypatch):
    cache = tmp_path / "tune.json"
    records = synthetic(SHAPE, PROFILE)
    _installed(monkeypatch, "3.6.0")
    first = live_tune.tune_shape(SHAPE, PROFILE, 4, measurer=counting(records), cache=cache, residual=None)
    assert first.triton == "3.6.0"
    again = counting(records)
    assert live_tune.tune_shape(SHAPE, PROFILE, 4, measurer=again, cache=cache, residual=None).winner == first.winner
    assert again.batches == []  # same Triton: the cache answers
    _installed(monkeypatch, "3.9.0")
    newer = counting(records)
    result = live_tune.tune_shape(SHAPE, PROFILE, 4, measurer=newer, cache=cache, residual=None)
    assert newer.batches and result.triton == "3.9.0"  # another Triton: measured again, not reused
    keys = list(json.loads(cache.read_text())["entries"])
    assert len(keys) == 2 and {"triton=3.6.0", "triton=3.9.0"} == {k.split("|")[4] for k in keys}


def test_the_shipped_residual_ranks_only_under_the_release_it_was_fitted_or_checked_under():
    spec = kernel_of(SHAPE)
    shipped = load_residual("gemm", PROFILE, "3.6.0")
    assert shipped.tritons == ("3.6",)
    residual, note = residual_choice.residual_choice(spec, PROFILE, "3.6.0")
    assert residual is not None and "Triton 3.6" in note
    residual, note = residual_choice.residual_choice(spec, PROFILE, "3.9.0")  # 3.9's own, fitted on its sweep
    assert residual.tritons == ("3.9",) and "Triton 3.9" in note and residual.coefficients != shipped.coefficients
    residual, note = residual_choice.residual_choice(spec, PROFILE, "3.7.1")  # none fitted or checked under 3.7
    assert residual is None and "fitted or checked under Triton 3.7" in note and "fit gemm --check" in note
    assert shipped.applies_to(spec.space.version, None)  # no version given: replay of data that name none


def test_a_residual_that_records_no_release_refuses_none():
    residual = make_residual("gemm", PROFILE, {"compute_frac": 0.1}, {}, {"space_version": "gemm-x"})
    assert residual.tritons == () and residual.applies_to("gemm-x", "3.9.0")


@pytest.mark.slow  # evaluates the whole training set: 7-11 s
def test_eval_takes_the_datasets_triton(tmp_path):
    data = tmp_path / "train"
    shutil.copytree(TRAIN, data)
    assert {r.meta["triton"] for r in read_dataset(data)} == {"3.6.0"}
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["device"]["triton"] = "3.7.1"
    (data / "manifest.json").write_text(json.dumps(manifest))
    result = runner.invoke(app, ["eval", "gemm", "--data", str(data), "--budget", "1", "--gpu", "h200",
                                 "--methods", "rooftune"])
    assert result.exit_code == 0, result.output
    assert "fitted or checked under Triton 3.7" in " ".join(result.output.split())  # the model alone ranks there


@pytest.fixture
def train_under_39(tmp_path):
    """12 training shapes, their manifest saying Triton 3.9.0."""
    data = tmp_path / "train39"
    (data / "shapes").mkdir(parents=True)
    manifest = json.loads((TRAIN / "manifest.json").read_text())
    manifest["device"]["triton"] = "3.9.0"
    (data / "manifest.json").write_text(json.dumps(manifest))
    shutil.copy(TRAIN.parent / "shapes_train.json", tmp_path / "shapes_train.json")
    for path in shape_files(TRAIN)[::10]:
        shutil.copy(path, data / "shapes" / path.name)
    return data


def test_fit_check_adds_the_release_where_the_residual_still_ranks_well(train_under_39, tmp_path):
    out = tmp_path / "checked.json"
    result = runner.invoke(app, ["fit", "gemm", "--data", str(train_under_39), "--gpu", "h200",
                                 "--check", "shipped", "--out", str(out)])
    assert result.exit_code == 0, result.output
    checked = read_residual(out)
    assert checked.tritons == ("3.6", "3.9")
    assert checked.fit["triton_checks"]["3.9"]["ranks_well"] is True
    assert checked.coefficients == load_residual("gemm", PROFILE, "3.6.0").coefficients
    assert cache.residual_digest(checked) == cache.residual_digest(load_residual("gemm", PROFILE, "3.6.0"))  # caches kept


def test_fit_check_writes_nothing_where_the_residual_ranks_worse(train_under_39, tmp_path):
    shipped = load_residual("gemm", PROFILE, "3.6.0")
    bad = tmp_path / "bad.json"
    data = json.loads(shipped_residual_path("gemm", PROFILE, "3.6").read_text())
    data["coefficients"] = {k: -40 * v for k, v in shipped.coefficients.items()}  # a residual that misranks
    data["pick"], data["fit"]["vote"] = {}, None  # (its neighbour vote was measured against other coefficients)
    bad.write_text(json.dumps(data))
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["fit", "gemm", "--data", str(train_under_39), "--gpu", "h200",
                                 "--check", str(bad), "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "ranks worse than the model alone" in " ".join(result.output.split()) and not out.exists()


def test_fit_check_refuses_another_space(train_under_39, tmp_path):
    manifest = json.loads((train_under_39 / "manifest.json").read_text())
    manifest["space_version"] = "gemm-000000000000"
    (train_under_39 / "manifest.json").write_text(json.dumps(manifest))
    result = runner.invoke(app, ["fit", "gemm", "--data", str(train_under_39), "--gpu", "h200", "--check", "shipped",
                                 "--out", str(tmp_path / "x.json")])
    assert result.exit_code == 2 and "fit a new residual" in " ".join(result.output.split())


def test_the_autotune_cache_key_names_the_triton(monkeypatch):
    monkeypatch.setattr(autotune, "installed_triton", lambda: "3.6.0")
    old = autotune.entry_key("NVIDIA H200", "k:abc", (64, 64), ["c1"], "generic model, budget 5")
    monkeypatch.setattr(autotune, "installed_triton", lambda: "3.9.0")
    new = autotune.entry_key("NVIDIA H200", "k:abc", (64, 64), ["c1"], "generic model, budget 5")
    assert "triton=3.6.0" in old and "triton=3.9.0" in new and old != new


def test_fit_check_refuses_held_out_data(tmp_path):
    heldout = TRAIN.parent / "heldout"
    result = runner.invoke(app, ["fit", "gemm", "--data", str(heldout), "--gpu", "h200", "--check", "shipped",
                                 "--out", str(tmp_path / "x.json")])
    assert result.exit_code == 2 and "held-out" in " ".join(result.output.split()) and not (tmp_path / "x.json").exists()


@pytest.fixture
def shipped_root(tmp_path, monkeypatch):
    """The shipped 3.6 residuals copied to a temporary folder that selection, `fit --out shipped` and `--check
    shipped` read and write, so a test's fit ships nothing; the shipped 3.9 ones are left out, so 3.9 stands here for
    a release with no residual of its own."""
    root = tmp_path / "residuals"
    shutil.copytree(releases.residuals_root() / "triton-3.6", root / "triton-3.6")
    monkeypatch.setattr(releases, "residuals_root", lambda: root)
    return root


def test_the_model_alones_figures_go_into_a_new_residual_record(monkeypatch):
    from rooftune.tuner import fitting

    monkeypatch.setattr(fitting, "model_alone_means", lambda records, profile, budgets: {b: 0.5 for b in budgets})
    residual = make_residual("gemm", PROFILE, {}, {}, {"data": "train", "triton": ["3.9"]})
    report = fitting.FitReport(residual, None, {1: {"mean": 0.9}, 5: {"mean": 0.95}}, [])
    recorded, check = fitting.fit_against_model(report, residual, [], PROFILE)
    assert recorded.fit["model_alone"] == {"1": 0.5, "5": 0.5} and "model_alone" not in residual.fit
    assert check.model_mean == {1: 0.5, 5: 0.5} and check.residual_mean == {1: 0.9, 5: 0.95} and check.ranks_well


def test_fit_out_shipped_files_the_residual_under_the_datas_release(train_under_39, shipped_root, monkeypatch):
    """On 12 shapes the fit itself ranks worse than the model alone (the next test): here the model alone is made
    poor, so the residual ships, and where it goes is what is tested."""
    from rooftune.tuner import fitting

    monkeypatch.setattr(fitting, "model_alone_means", lambda records, profile, budgets: {b: 0.5 for b in budgets})
    before = (shipped_root / "triton-3.6" / "gemm-NVIDIA_H200.json").read_bytes()
    result = runner.invoke(app, ["fit", "gemm", "--data", str(train_under_39), "--gpu", "h200", "--out", "shipped"])
    assert result.exit_code == 0, result.output
    written = read_residual(shipped_root / "triton-3.9" / "gemm-NVIDIA_H200.json")
    assert written.tritons == ("3.9",) and written.fit["shapes"] == 12
    assert set(written.fit["model_alone"]) == {"1", "5", "10", "20"} and "(the model alone: mean 0.500)" in " ".join(result.output.split())
    assert (shipped_root / "triton-3.6" / "gemm-NVIDIA_H200.json").read_bytes() == before  # 3.6's untouched
    space = kernel_of(SHAPE).space.version
    assert choose_residual("gemm", PROFILE, space, "3.9.0")[0].coefficients == written.coefficients
    assert choose_residual("gemm", PROFILE, space, "3.6.0")[0].tritons == ("3.6",)
    # a second fit of the same release replaces it; data that name no Triton cannot be shipped as any release's
    manifest = json.loads((train_under_39 / "manifest.json").read_text())
    del manifest["device"]["triton"]
    (train_under_39 / "manifest.json").write_text(json.dumps(manifest))
    result = runner.invoke(app, ["fit", "gemm", "--data", str(train_under_39), "--gpu", "h200", "--out", "shipped"])
    assert result.exit_code == 2 and "records no Triton version" in " ".join(result.output.split())


def test_fit_check_shipped_checks_the_newest_other_release_in_place(train_under_39, shipped_root):
    """3.9 data, residuals of 3.6 and 3.7 shipped: `--check shipped` checks 3.7's (the newest other release) and
    adds 3.9 to it in its own folder, where selection under 3.9 then finds it."""
    data = json.loads((shipped_root / "triton-3.6" / "gemm-NVIDIA_H200.json").read_text())
    data["fit"]["triton"] = ["3.7"]
    (shipped_root / "triton-3.7").mkdir()
    (shipped_root / "triton-3.7" / "gemm-NVIDIA_H200.json").write_text(json.dumps(data))
    shutil.copy(shipped_root / "triton-3.6" / "neighbours-gemm-NVIDIA_H200.json", shipped_root / "triton-3.7")
    space = kernel_of(SHAPE).space.version
    assert choose_residual("gemm", PROFILE, space, "3.9.0")[0] is None
    result = runner.invoke(app, ["fit", "gemm", "--data", str(train_under_39), "--gpu", "h200", "--check", "shipped"])
    assert result.exit_code == 0, result.output
    checked = read_residual(shipped_root / "triton-3.7" / "gemm-NVIDIA_H200.json")
    assert checked.tritons == ("3.7", "3.9") and checked.fit["triton_checks"]["3.9"]["ranks_well"] is True
    assert load_residual("gemm", PROFILE, "3.6.0").tritons == ("3.6",)  # the older release's is left alone
    assert choose_residual("gemm", PROFILE, space, "3.9.0")[0].tritons == ("3.7", "3.9")
    assert choose_residual("gemm", PROFILE, space, "3.8.0")[0] is None


def test_fit_out_shipped_ships_nothing_where_the_model_alone_ranks_better(train_under_39, shipped_root, monkeypatch):
    """The rule a release falls back by: its fitted residual ships only where, cross-validated, it ranks at least as
    well as the model alone on the same training data on average over the budgets (here a model alone made perfect)."""
    from rooftune.tuner import fitting

    monkeypatch.setattr(fitting, "model_alone_means", lambda records, profile, budgets: {b: 1.0 for b in budgets})
    result = runner.invoke(app, ["fit", "gemm", "--data", str(train_under_39), "--gpu", "h200", "--out", "shipped"])
    assert result.exit_code == 1 and "ranks worse than the model alone on average: not shipped" in " ".join(result.output.split())
    assert not (shipped_root / "triton-3.9").exists() or not list((shipped_root / "triton-3.9").iterdir())
    out = train_under_39.parent / "mine.json"  # a residual asked for by path is written, figures and all
    assert runner.invoke(app, ["fit", "gemm", "--data", str(train_under_39), "--gpu", "h200", "--out", str(out)]).exit_code == 0
