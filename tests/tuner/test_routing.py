"""The untuned route: fitting on training data only, its choice on recorded shapes (each way), the ops and
`explain` following it, $ROOFTUNE_KERNEL_ONLY, and the op-vs-library figure of `eval` on a hand-computed dataset."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rooftune.candidates import LIBRARY_ROUTE, GemmShape, Trial, kernel_of, kernel_spec, legal_configs
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets.format import SHAPE_SUFFIXES, read_shape, shape_path, to_records
from rooftune.eval.scoring.metrics import versus_library
from rooftune.hwprofiles import load_profile
from rooftune.roofline.residual import ResidualError
from rooftune.roofline.route import Route, load_route, route_from_dict, route_part, route_to_dict
from rooftune.tuner import route_fit
from rooftune.tuner.cli.app import app
from rooftune.tuner.evaluation import op_versus_library
from rooftune.tuner.fitting import HeldOutError
from rooftune.tuner.pytorch import ops
from rooftune.tuner.residual_choice import shipped_residual
from rooftune.tuner.routing import route_choice, untuned_choice

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "datasets" / "h200"
PROFILE = load_profile("h200")
TRITON = "3.6.0"  # the release the shipped routes and residuals were fitted under
runner = CliRunner()

_OPENED: list[str] = []
_AUDITING = [False]


def _audit(event, args):
    if _AUDITING[0] and event == "open" and args and isinstance(args[0], (str, bytes, Path)):
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)  # records only while _AUDITING is set


@pytest.mark.parametrize("kernel", ["gemm", "attention"])
def test_the_route_is_fitted_on_training_data_only(kernel):
    """Fitting refuses a held-out dataset before opening one of its shapes; the shipped routes name training data."""
    spec = kernel_spec(kernel)
    residual = shipped_residual(spec, PROFILE, TRITON)
    _OPENED.clear()
    _AUDITING[0] = True
    try:
        with pytest.raises(HeldOutError, match="held-out"):
            route_fit.fit_route_data(DATA / kernel / "heldout", kernel, PROFILE, residual, spec.baseline)
    finally:
        _AUDITING[0] = False
    assert not [p for p in _OPENED if "heldout" in p and p.endswith(SHAPE_SUFFIXES)]
    result = runner.invoke(app, ["fit", kernel, "--data", str(DATA / kernel / "heldout"), "--route",
                                 "--out", "/tmp/never.json"])
    assert result.exit_code == 2 and "held-out" in " ".join(result.output.split())
    route = load_route(kernel, PROFILE, release="3.6")
    assert route is not None and "heldout" not in route.fit["data"] and route.fit["shapes"] == 120
    newer = load_route(kernel, PROFILE, release="3.9")  # GEMM's under 3.9: on that release's training sweep
    assert newer is None if kernel == "attention" else newer.fit["data"].endswith("triton-3.9/gemm/train")
    assert route_choice(spec, PROFILE, residual, TRITON)[0] == route


def _recorded(kernel: str, sid: str) -> ShapeRecords:
    return to_records(read_shape(shape_path(DATA / kernel / "train", sid)))


@pytest.mark.parametrize("kernel, library_wins, kernel_wins", [
    ("gemm", "3359x1536x1536-nk-bf16", "16x50257x768-nk-bf16"),
    ("attention", "1x32x16384x128-causal-bf16", "15x16x64x128x2-causal-bf16"),
])
def test_the_route_sends_a_shape_the_library_wins_to_it_and_keeps_the_kernel_where_it_wins(kernel, library_wins,
                                                                                           kernel_wins):
    spec = kernel_spec(kernel)
    residual = shipped_residual(spec, PROFILE, TRITON)
    route = route_choice(spec, PROFILE, residual, TRITON)[0]
    for name, library in ((library_wins, True), (kernel_wins, False)):
        records = _recorded(kernel, name)
        choice = untuned_choice(records.shape, records.candidate_configs(), PROFILE, residual, route)
        pick_us = records.lookup()[choice.pick].time_us
        assert (records.baselines_us[spec.baseline] < pick_us) == library  # as recorded on the H200
        assert choice.library == library and ("the library" if library else "the kernel") in choice.why
        kept = untuned_choice(records.shape, records.candidate_configs(), PROFILE, residual, route, kernel_only=True)
        assert not kept.library and kept.pick == choice.pick


def test_the_untuned_op_follows_the_route_unless_kernel_only(tmp_path, monkeypatch):
    monkeypatch.setattr(ops, "installed_triton", lambda: TRITON)
    library, kernel = GemmShape(3359, 1536, 1536, layout="nk"), GemmShape(16, 50257, 768, layout="nk")
    cache = tmp_path / "tune.json"
    assert ops.choose_config(library, PROFILE, cache, tune=False) == LIBRARY_ROUTE
    kept = ops.choose_config(library, PROFILE, cache, tune=False, kernel_only=True)
    assert kept != LIBRARY_ROUTE and kept in legal_configs(kernel_of(library).space, library, PROFILE).configs
    assert ops.choose_config(kernel, PROFILE, cache, tune=False) != LIBRARY_ROUTE
    monkeypatch.setattr(ops, "installed_triton", lambda: "9.9.0")  # a release no route was fitted under:
    for shape in (library, kernel):  # nothing says the pick beats the library there, so the library runs
        assert ops.choose_config(shape, PROFILE, cache, tune=False) == LIBRARY_ROUTE
        assert ops.choose_config(shape, PROFILE, cache, tune=False, kernel_only=True) != LIBRARY_ROUTE


def test_explain_says_what_the_untuned_op_runs(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    from rooftune.tuner.cli import explain

    monkeypatch.setattr(explain, "installed_triton", lambda: TRITON)
    out = runner.invoke(app, ["explain", "gemm", "--shape", "3359x1536x1536", "--layout", "nk", "--gpu", "h200"])
    assert out.exit_code == 0 and "untuned op runs the library" in " ".join(out.output.split())
    monkeypatch.setenv("ROOFTUNE_KERNEL_ONLY", "1")
    out = runner.invoke(app, ["explain", "gemm", "--shape", "3359x1536x1536", "--layout", "nk", "--gpu", "h200"])
    assert "untuned op runs the kernel: $ROOFTUNE_KERNEL_ONLY" in " ".join(out.output.split())
    monkeypatch.delenv("ROOFTUNE_KERNEL_ONLY")
    monkeypatch.setattr(explain, "installed_triton", lambda: "9.9.0")  # no route fitted under it: the library
    out = runner.invoke(app, ["explain", "gemm", "--shape", "16x50257x768", "--layout", "nk", "--gpu", "h200"])
    assert "untuned op runs the library: no route is fitted for gemm on NVIDIA H200 under Triton 9.9" in " ".join(
        out.output.split())


def test_the_route_learns_from_picks_made_by_a_residual_that_never_saw_the_shape(monkeypatch):
    """Each training row's pick comes from the shipped residual's setting refitted on the other folds, with a vote
    from those folds' shapes: the pick a new shape gets, not the in-sample pick of the residual fitted on it."""
    from rooftune.roofline.fit import RidgeSettings, fit_coefficients, prepare
    from rooftune.tuner.fitting import fit_shapes_from_records

    ids = sorted(p.name.split(".")[0] for p in (DATA / "gemm" / "train" / "shapes").iterdir())[::12]
    records = [_recorded("gemm", sid) for sid in ids]
    residual = shipped_residual(kernel_spec("gemm"), PROFILE, TRITON)
    folds = route_fit.fold_residuals(records, PROFILE, residual)
    assert set(folds) == {r.shape for r in records} and len({id(f) for f in folds.values()}) == route_fit.FOLDS
    ridge = RidgeSettings(residual.fit["ridge"], residual.fit["near_best_weight"])
    for r in records:
        fold = folds[r.shape]
        others = [x for x in records if folds[x.shape] is not fold]
        assert r.shape not in {n.shape for n in fold.neighbours.neighbours}
        assert {n.shape for n in fold.neighbours.neighbours} == {x.shape for x in others}
        expected = fit_coefficients(prepare(fit_shapes_from_records(others), PROFILE), ridge)
        assert fold.coefficients == pytest.approx(expected)
    ranked_by = {}  # the residual each row's pick was made with
    real_pick = route_fit.zero_trial
    monkeypatch.setattr(route_fit, "zero_trial",
                        lambda shape, configs, profile, res: ranked_by.setdefault(shape, res) and real_pick(
                            shape, configs, profile, res))
    rows = route_fit.route_rows(records, PROFILE, residual, "cublas")
    assert [row.shape for row in rows] == [r.shape for r in records]
    assert all(ranked_by[r.shape].coefficients == folds[r.shape].coefficients for r in records)
    assert route_fit.fold_residuals(records, PROFILE, None) == {}  # the model alone: no fit to fold


def test_route_files_round_trip_and_bad_ones_are_named():
    route = load_route("gemm", PROFILE)
    assert route_from_dict(route_to_dict(route), "x") == route
    with pytest.raises(ResidualError, match="not a rooftune route"):
        route_from_dict({"format": "other"}, "x")
    with pytest.raises(ResidualError, match="malformed route"):
        route_from_dict({**route_to_dict(route), "mean": [0.0]}, "x")


def _uniform(shape: GemmShape, time_us: float, library_us: float) -> ShapeRecords:
    """Every legal config recorded at `time_us` (so any pick takes it), the library at `library_us`."""
    configs = legal_configs(kernel_of(shape).space, shape, PROFILE).configs
    return ShapeRecords(shape, tuple(Trial(c, time_us) for c in configs), {"cublas": library_us})


def test_the_op_versus_library_figure_on_a_tiny_dataset():
    # log_m = log2(M) - 7: M 1, 4096, 16 -> -7, 5, -3; gain = -0.1 log_m: 0.7, -0.5, 0.3 against a margin of 0.1,
    # so the route keeps the kernel on the first and third shapes and sends the second to the library.
    records = [_uniform(GemmShape(1, 4096, 4096, layout="nk"), 8.0, 10.0),        # the kernel 1.25x faster
               _uniform(GemmShape(4096, 4096, 4096, layout="nk"), 12.5, 10.0),   # the kernel 0.8x
               _uniform(GemmShape(16, 4096, 4096, layout="nk"), 4.0, 5.0)]       # the kernel 1.25x
    route = Route("gemm", PROFILE.name, ("log_m",), (0.0,), (1.0,), (-0.1,), 0.0, 0.1)
    figures = op_versus_library(records, PROFILE, None, route, tuned_scores=[1.0, 1.0, 0.5])
    # untuned: 1.25, 1 (the library), 1.25; tuned: 1.25, 1 (10 µs < 12.5), 1 (the pick at 4 / 0.5 = 8 µs > 5)
    assert figures["untuned"] == pytest.approx({"geomean": 1.25 ** (2 / 3), "p10": 1.05, "min": 1.0, "below": 0,
                                                "n": 3, "failed": 0})
    assert figures["tuned"] == pytest.approx({"geomean": 1.25 ** (1 / 3), "p10": 1.0, "min": 1.0, "below": 0, "n": 3})
    # the zero-trial pick always (the kernel everywhere): 1.25, 0.8, 1.25
    assert figures["pick"] == pytest.approx({"geomean": 1.25 ** (1 / 3), "p10": 0.89, "min": 0.8, "below": 1, "n": 3,
                                             "failed": 0})
    without = op_versus_library(records, PROFILE, None, None)  # no route: the library everywhere untuned
    assert without["untuned"] == pytest.approx({"geomean": 1.0, "p10": 1.0, "min": 1.0, "below": 0, "n": 3,
                                                "failed": 0})
    assert without["pick"] == figures["pick"] and "tuned" not in without
    assert math.isnan(versus_library([])["geomean"]) and versus_library([])["n"] == 0


def test_the_cv_chooses_a_margin_that_never_loses_on_a_held_back_shape():
    """Rows whose gain is a step in log_m, the other features noise: the chosen setting loses on none."""
    rng = np.random.default_rng(0)
    names = sorted({n for features in route_part("gemm").grid for n in features})
    rows = []
    for i in range(60):
        log_m = rng.uniform(-7, 7)
        gain = 0.3 if log_m < 0 else -0.2
        rows.append(route_fit.RouteRow(None, {n: rng.normal() for n in names} | {"log_m": log_m},
                                       1.0, math.exp(-gain)))
    route, chosen, table = route_fit.fit_route(rows, "gemm", PROFILE)
    assert chosen["below"] == 0 and chosen["geomean"] > 1.1 and len(table) > 1
    ratios = route_fit.routed_ratios(rows, [route.keeps_kernel(r.features) for r in rows])
    assert ratios.min() >= 1.0


@pytest.mark.gpu
def test_on_a_gpu_an_untuned_op_runs_the_library_or_the_kernel_as_the_route_says(tmp_path, monkeypatch):
    """Two training shapes, one each way: the untuned `rooftune.linear` resolves to the library's op for the one
    and to the kernel's pick for the other (an empty cache, nothing tuned), and both compute x @ wᵀ."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from rooftune.hwprofiles.hwprobe import installed_triton

    spec = kernel_spec("gemm")
    residual = shipped_residual(spec, PROFILE)
    if route_choice(spec, PROFILE, residual, installed_triton())[0] is None:
        pytest.skip(f"the shipped route does not apply under Triton {installed_triton()}")
    monkeypatch.setenv("ROOFTUNE_CACHE", str(tmp_path / "tune.json"))
    monkeypatch.setenv("ROOFTUNE_PROFILE", "h200")
    for name in ("ROOFTUNE_KERNEL_ONLY", "ROOFTUNE_TUNE"):
        monkeypatch.delenv(name, raising=False)
    import rooftune

    ops.clear_memo()
    for (m, n, k), library in (((3359, 1536, 1536), True), ((16, 50257, 768), False)):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        out = rooftune.linear(x, w)
        config = ops.resolve_config(GemmShape(m, n, k, "nk"), x.device, False)
        assert (config == LIBRARY_ROUTE) == library, (m, n, k, config)
        ref = x.float() @ w.float().t()
        assert float((out.float() - ref).norm() / ref.norm()) < 1e-2
