"""The shipped GEMM setting (ridge 0.1, vote of 3 at 0.5 / 0.5) against the one folds by layer chose (ridge 1,
vote of 5 at 1.0 / 0.5), each cross-validated with folds by shape and by layer over fold seeds 0-2, train only."""
import sys

from rooftune.candidates.families import KernelSpec
from rooftune.eval.datasets.readers import load_records
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings
from rooftune.roofline.neighbours import VoteSettings
from rooftune.tuner import fitting
from rooftune.tuner.search.gp import SearchSettings

by_layer = lambda self, shape: (shape.n, shape.k, shape.layout) if self.name == "gemm" else None  # noqa: E731
by_shape = KernelSpec.fold_group
profile = load_profile("h200")
shapes = fitting.fit_shapes_from_records(load_records("datasets/h200/gemm/train", kernel="gemm"))
data = fitting.prepare(shapes, profile)
search = SearchSettings(kappa=2.0, length_scale=2.0, prior_sd=0.1)
settings = {"shipped (ridge 0.1, vote 3 at 0.5/0.5)": fitting.Candidate(RidgeSettings(0.1, 5.0), search, None,
                                                                       VoteSettings(3, 0.5, 0.5)),
            "by-layer choice (ridge 1, vote 5 at 1.0/0.5)": fitting.Candidate(RidgeSettings(1.0, 5.0), search, None,
                                                                             VoteSettings(5, 1.0, 0.5))}
for mode, group in (("shape", by_shape), ("layer", by_layer)):
    KernelSpec.fold_group = group
    for seed in (0, 1, 2):
        fitting.FOLD_SEED = seed
        for name, cand in settings.items():
            fits = fitting.fold_fits(data, cand.ridge, cand.pick)
            votes = fitting.fold_votes(data, fits, cand.vote.k, profile)
            cv = fitting.cross_validate(data, cand, fits=fits, votes=votes)
            cells = "  ".join(f"{b}: {s['mean']:.4f} / {s['worst_decile_mean']:.4f}" for b, s in cv.items())
            print(f"folds by {mode}, seed {seed}, {name}: objective {fitting.objective(cv):.4f}  {cells}", flush=True)
sys.exit(0)
