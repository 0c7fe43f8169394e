"""`rooftune fit`: cross-validation picks the setting, the held-out data are never read, the output is usable."""

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooftune.eval.datasets.readers import load_records
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings
from rooftune.roofline.neighbours import VoteSettings
from rooftune.roofline.residual import read_residual
from rooftune.tuner import fitting
from rooftune.tuner.cli.app import app
from rooftune.tuner.search.gp import SearchSettings

REPO = Path(__file__).resolve().parents[2]
TRAIN, HELDOUT = REPO / "datasets/h200/gemm/train", REPO / "datasets/h200/gemm/heldout"
PROFILE = load_profile("h200")
runner = CliRunner()


def test_held_out_datasets_are_refused():
    with pytest.raises(fitting.HeldOutError, match="held-out"):
        fitting.refuse_held_out({"shapes_file": "shapes_heldout.json"}, "x")
    fitting.refuse_held_out({"shapes_file": "shapes_train.json"}, "x")
    fitting.refuse_held_out({"shapes_file": "shapes_train_half.json", "shapes_files": ["shapes_train.json"]}, "x")
    with pytest.raises(fitting.HeldOutError, match="shapes_heldout_b.json"):  # a later sweep's list counts too
        fitting.refuse_held_out({"shapes_file": "shapes_train.json", "shapes_files": ["shapes_heldout_b.json"]}, "x")
    result = runner.invoke(app, ["fit", "gemm", "--data", str(HELDOUT), "--out", "/tmp/never.json"])
    assert result.exit_code == 2 and "held-out" in " ".join(result.output.split())
    assert not Path("/tmp/never.json").exists() and not Path("/tmp/neighbours-never.json").exists()


def test_every_committed_held_out_folder_is_refused_and_no_training_folder_is():
    """Each dataset folder under datasets/ that holds held-out shapes (its path says heldout, or it repeats a held-out
    sweep, as datasets/h100/releases/triton-3.9/gemm/repeat does) records a held-out list, so fit refuses it; each
    folder named train* records none."""
    manifests = sorted((REPO / "datasets").rglob("manifest.json"))
    assert len(manifests) > 10
    held_out = 0
    for path in manifests:
        folder = path.parent.relative_to(REPO)
        manifest = json.loads(path.read_text())
        if "heldout" in str(folder).replace("-", "").replace("_", "") or folder.name == "repeat":
            held_out += 1
            with pytest.raises(fitting.HeldOutError):
                fitting.refuse_held_out(manifest, str(folder))
        elif folder.name.startswith("train"):
            fitting.refuse_held_out(manifest, str(folder))
    assert held_out >= 6


_OPENED: list[str] = []
_AUDITING = [False]


def _audit(event, args):
    if _AUDITING[0] and event == "open" and args and isinstance(args[0], (str, bytes, Path)):
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)  # audit hooks stay for the process; it records only while _AUDITING is set


def test_fit_reads_training_data_only_and_writes_a_usable_residual(tmp_path, monkeypatch):
    """The whole `rooftune fit gemm` run (one CV setting and one vote, to keep it short) opens no file of the
    held-out set, and what it writes is a residual, with its neighbour table of training shapes beside it, that
    `eval` takes."""
    one = [fitting.Candidate(RidgeSettings(0.1, 5.0), SearchSettings())]
    monkeypatch.setattr(fitting, "candidates_grid", lambda: one)
    monkeypatch.setattr(fitting, "VOTE_GRID", (VoteSettings(5, 0.5, 0.5),))
    out = tmp_path / "residual.json"
    _OPENED.clear()
    _AUDITING[0] = True
    try:
        result = runner.invoke(app, ["fit", "gemm", "--data", str(TRAIN), "--out", str(out)])
    finally:
        _AUDITING[0] = False
    assert result.exit_code == 0, result.output
    opened = [p for p in _OPENED if "datasets" in p]
    assert any("train" in p for p in opened) and not [p for p in opened if "heldout" in p]
    residual = read_residual(out)
    assert residual.fit["data"] == str(TRAIN) and residual.fit["shapes"] == 120
    assert set(residual.fit["cv"]) == {"1", "5", "10", "20"} and len(residual.fit["static_list"]) == 20
    assert residual.strategy == SearchSettings().to_dict()
    # the vote gains in CV on train: its table is written beside the residual, every entry a training shape
    train_shapes = {r.shape for r in load_records(TRAIN)}
    assert residual.fit["vote"] == {"k": 5, "w_pick": 0.5, "w_search": 0.5} and residual.fit["cv_without_vote"]
    assert len(residual.neighbours.neighbours) == 120 and {n.shape for n in residual.neighbours.neighbours} == train_shapes
    assert residual.fit["cv"]["1"]["mean"] > residual.fit["cv_without_vote"]["1"]["mean"]
    summary = tmp_path / "s.json"
    probe = REPO.parent / "shared" / "datasets" / "h200-probe"
    if probe.is_dir():  # eval takes the written residual
        r = runner.invoke(app, ["eval", "gemm", "--data", str(probe), "--budget", "5", "--residual", str(out),
                                "--methods", "rooftune,static", "--json", str(summary)])
        assert r.exit_code == 0, r.output
        assert set(json.loads(summary.read_text())["methods"]) == {"rooftune", "static"}


def test_cross_validation_chooses_by_its_objective(monkeypatch):
    shapes = fitting.fit_shapes_from_records(load_records(TRAIN)[:12])
    grid = [fitting.Candidate(RidgeSettings(0.1, 5.0), SearchSettings(kappa=k)) for k in (0.5, 2.0)]
    votes = [VoteSettings(3, 0.5, 0.0), VoteSettings(3, 1.0, 0.5)]
    report = fitting.fit_kernel("gemm", shapes, PROFILE, "train[:12]", grid=grid, vote_grid=votes)
    scores = dict((c.search.kappa, s) for c, s in report.tried)
    assert report.chosen.search.kappa == max(scores, key=scores.get)
    # the vote is kept only where it beats the chosen setting alone, the best of those tried
    alone, voted = max(scores.values()), dict((c.vote, s) for c, s in report.tried_votes)
    assert [c.search.kappa for c, _ in report.tried_votes] == [report.chosen.search.kappa] * 2
    best = max(voted, key=voted.get)
    assert report.chosen.vote == (best if voted[best] > alone else None)
    assert fitting.objective(report.cv) == pytest.approx(max(alone, *voted.values()))
    assert (report.residual.neighbours is not None) == (report.chosen.vote is not None)


def test_the_fits_prior_is_the_one_tune_ranks_by(synthetic):
    # Cross-validation replays the search on precomputed features (fitting.prior_log_us); `tune` ranks
    # through the Residual object (strategies.corrected_prior, zero_trial_pick). The two must agree.
    import numpy as np

    from rooftune.candidates import GemmShape
    from rooftune.roofline.fit import FitShape, make_residual, prepare
    from rooftune.tuner.search.strategies import corrected_prior, zero_trial_pick

    shapes = [GemmShape(777, 2048, 3072), GemmShape(16, 14336, 4096, layout="nk")]
    records = [synthetic(s, PROFILE) for s in shapes]
    data = prepare([FitShape(r.shape, tuple(r.candidate_configs()),
                             np.array([r.lookup()[c].time_us for c in r.candidate_configs()]))
                    for r in records], PROFILE)
    coefficients = {name: 0.01 * (i % 7 - 3) for i, name in enumerate(data[0].names)}
    pick = {name: 0.02 * (i % 5 - 2) for i, name in enumerate(data[0].names) if "*" not in name}
    residual = make_residual("gemm", PROFILE, coefficients, {}, {}, pick)
    for d in data:
        configs, prior = corrected_prior(d.source.shape, list(d.source.configs), PROFILE, residual)
        fitting_prior = fitting.prior_log_us(d, coefficients)
        keep = [i for i, c in enumerate(d.source.configs) if np.isfinite(fitting_prior[i])]
        assert configs == [d.source.configs[i] for i in keep]
        np.testing.assert_allclose(prior, fitting_prior[keep], rtol=1e-12)
        # and the zero-trial pick is the one cross-validation replays first
        first = fitting.replay_search(d, coefficients, SearchSettings(), budget=1, pick=pick)[0].config
        assert first == zero_trial_pick(d.source.shape, list(d.source.configs), PROFILE, residual)


def test_moe_folds_keep_a_layer_together_and_other_kernels_fold_by_shape():
    """Fused MoE's held-out list is split by model, so its CV folds hold back whole layers; GEMM's by shape."""
    from types import SimpleNamespace

    from rooftune.candidates import GemmShape, MoeShape

    def prepared(shapes):
        return [SimpleNamespace(source=SimpleNamespace(shape=s)) for s in shapes]

    layers = [(8, 2, 4096, 14336), (64, 6, 2048, 1408), (16, 1, 5120, 8192)]
    moe = [MoeShape(*layer, tokens=m, gemm=g) for layer in layers for m in (1, 64, 4096) for g in ("gate_up", "down")]
    folds = fitting.fold_assignment(prepared(moe))
    assert len(folds) == 3 and sorted(i for f in folds for i in f) == list(range(len(moe)))
    for fold in folds:
        assert len({fitting.fold_group(moe[i]) for i in fold}) == 1 and len(fold) == 6
    seven = [MoeShape(8 + i, 2, 1024, 512, tokens=16) for i in range(7)]  # more layers than folds: at most FOLDS
    assert len(fitting.fold_assignment(prepared(seven))) == fitting.FOLDS
    gemm = [GemmShape(64 * i, 512, 512) for i in range(1, 13)]
    folds = fitting.fold_assignment(prepared(gemm))
    assert len(folds) == fitting.FOLDS and sorted(i for f in folds for i in f) == list(range(12))
    assert max(len(f) for f in folds) == 3  # dealt one shape at a time
    one_layer = fitting.fold_assignment(prepared(moe[:6]))  # a single layer cannot be left out: by shape
    assert len(one_layer) == fitting.FOLDS


def test_a_held_back_shapes_vote_comes_from_the_other_folds_only(monkeypatch):
    """Cross-validating the vote: a held-back shape's neighbours are training shapes of the other folds, never of
    its own (which its CV score must not see), and the nearest of those."""
    from rooftune.roofline.fit import prepare
    from rooftune.roofline.neighbours import point

    data = prepare(fitting.fit_shapes_from_records(load_records(TRAIN)[:15]), PROFILE)
    fits = fitting.fold_fits(data, RidgeSettings(1.0, 5.0), None)
    voters, real = [], fitting.misses
    monkeypatch.setattr(fitting, "misses", lambda n, c, p: voters.append(n.shape) or real(n, c, p))
    for test, fitted in fits:
        voters.clear()
        votes = fitting.fold_votes(data, [(test, fitted)], 3, PROFILE)
        held = {data[i].source.shape for i in test}
        assert set(votes) == set(test) and len(voters) == 3 * len(test) and not held & set(voters)
        i, others = test[0], [d.source.shape for j, d in enumerate(data) if j not in test]
        distance = {s: float(((point(s, PROFILE) - point(data[i].source.shape, PROFILE)) ** 2).sum()) for s in others}
        assert voters[:3] == sorted(others, key=distance.get)[:3]


def test_no_vote_is_tried_on_configs_outside_the_space():
    """Another kernel's log (the AutoHeuristic ones: Inductor's template, without the space's parameters) has no
    regret a vote could look up at tune time: cross-validation does not try one there."""
    from types import SimpleNamespace

    from rooftune.candidates import Config

    theirs = [SimpleNamespace(source=SimpleNamespace(configs=(Config.make(4, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                                                                                     GROUP_M=8),)))] * 10
    chosen = fitting.Candidate(RidgeSettings(1.0, 5.0), SearchSettings())
    cv = {1: {"mean": 0.9, "p10": 0.8, "worst_decile_mean": 0.7}}
    assert fitting.choose_vote("gemm", theirs, chosen, cv, [([0], None), ([1], None)], PROFILE) == (chosen, cv, [])
