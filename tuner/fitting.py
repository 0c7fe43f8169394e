"""`rooftune fit`: the residual and the search constants, chosen together by cross-validation on a
training dataset and written as one JSON beside the hardware profiles.

Cross-validation is by shape (for fused MoE, by layer: its held-out list is split by model): the training
shapes are split into folds; for each candidate setting
(ridge penalty, near-best weighting, with or without the zero-trial pick's own correction, search
constants) the residual is fitted on the other folds and the search (tuner/search/gp.py, the code
`rooftune tune` runs) is replayed on the held-back fold at every budget. The setting with the best
score over budgets wins and is refitted on every training shape. Then, for a family with neighbour coordinates,
the neighbour vote (roofline/neighbours.py) is cross-validated on the same folds beside the chosen setting: each
held-back shape's neighbours are drawn from the other folds, their misses measured against that fold's residual.
The vote's best setting is kept, with a table of every training shape, only where it beats the residual alone.
Held-out data are refused: a dataset whose shape list is a held-out list never reaches here.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from rooftune.candidates import KERNELS, Trial, kernel_of
from rooftune.eval.datasets.format import is_held_out_list, swept_lists
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.fit import (
    FitShape,
    PickSettings,
    Prepared,
    RidgeSettings,
    fit_coefficients,
    fit_pick,
    make_residual,
    prepare,
)
from rooftune.roofline.neighbours import (
    TOP,
    Neighbour,
    NeighbourTable,
    VoteSettings,
    combine,
    has_vote,
    misses,
    nearest,
    of_space,
    point,
    top_regrets,
)
from rooftune.roofline.releases import check_source, shipped_residual_path
from rooftune.roofline.residual import (
    Residual,
    ResidualError,
    pick_coefficients,
    ranking_digest,
    read_residual,
    residual_file_name,
    triton_release,
)
from rooftune.tuner.evaluation import evaluate
from rooftune.tuner.search.gp import SearchSettings, search
from rooftune.tuner.search.static import learn_static
from rooftune.tuner.search.strategies import rooftune_strategy

CV_BUDGETS = (1, 5, 10, 20)
FOLDS = 5
FOLD_SEED = 0
RIDGE_GRID = (RidgeSettings(0.1, 5.0), RidgeSettings(1.0, 5.0))
# The zero-trial pick's own correction (roofline/fit.py `fit_pick`), or None: it picks by the ridge fit.
PICK_GRID = (None, PickSettings())
# Round sizes are fixed rather than searched (tuner/search/gp.py): a live tune pays one compile latency per round.
SEARCH_GRID = {"kappa": (1.0, 2.0), "length_scale": (1.0, 2.0), "prior_sd": (0.05, 0.1)}
# The neighbour vote's settings, tried beside the chosen setting (the experiment that chose this grid:
# experiments/knn_pick/README.md).
VOTE_GRID = tuple(VoteSettings(k, w_pick, w_search) for k in (3, 5, 10) for w_pick in (0.5, 1.0)
                  for w_search in (0.0, 0.5))


class HeldOutError(ValueError):
    """Fitting was asked to read a held-out dataset."""


class FitError(ValueError):
    """A fit that cannot be made or written as asked: too few shapes, no --out, another kernel's residual file."""


# `--out shipped`: the residual file `tune`, `eval` and `explain` find for the profile under the data's Triton
# release (hwprofiles/residuals/triton-<release>/, roofline/releases.py).
SHIPPED = "shipped"


def fit_target(kernel: str, profile: HardwareProfile, out: str | None, triton: str | None) -> Path:
    """Where a fit of `kernel` on data made under Triton `triton` writes its residual: `out`, a path, or 'shipped'
    for the shipped file of that release. A fit replaces a shipped residual only when asked by name (a fit on a
    few shapes silently replacing it made every later tune and eval rank worse), never writes over another
    kernel's residual (by its file name, or by the residual already there), and ships one only for a known
    release (data that record no Triton version cannot say which release it ranks for)."""
    shipped = shipped_residual_path(kernel, profile, triton) if triton else None
    if out is None:
        where = f" ({shipped})" if shipped else ""
        raise FitError(f"give --out FILE for the fitted residual, or --out {SHIPPED} to write the shipped one of "
                       f"the data's Triton release{where}, which tune, eval and explain then use under it")
    if str(out) == SHIPPED:
        if shipped is None:
            raise FitError(f"--out {SHIPPED}: the data's manifest records no Triton version (device.triton), so "
                           f"no release's residual can be written; give --out FILE")
        shipped.parent.mkdir(parents=True, exist_ok=True)  # the first residual of a release makes its folder
        return shipped
    target = Path(out)
    named = next((k for k in KERNELS if k != kernel and target.name.startswith(f"{k}-")), None)
    if named is None and target.is_file():
        try:
            named = read_residual(target).kernel
        except (ResidualError, ValueError):
            named = None  # not a residual: the writer replaces it as any output
    if named is not None and named != kernel:
        raise FitError(f"--out {target}: names a residual of {named}, not {kernel}; give a file of {kernel} "
                       f"(e.g. {residual_file_name(kernel, profile)})")
    return target


def refuse_held_out(manifest: dict, where: str) -> None:
    """Held-out datasets are swept from a list named shapes_heldout*.json; fitting must never read one, nor a
    folder that any of its sweeps read one into (`swept_lists`)."""
    for listed in swept_lists(manifest):
        if is_held_out_list(listed):
            raise HeldOutError(f"{where} was swept from {listed}, a held-out list: fitting reads training data only")


def fit_shapes_from_records(records) -> list[FitShape]:
    """Each shape's candidate configs (the space) with their recorded times (NaN where failed)."""
    out = []
    for r in records:
        table = r.lookup()
        configs = tuple(r.candidate_configs())
        times = np.array([table[c].time_us if table[c].ok else np.nan for c in configs], dtype=float)
        if np.isfinite(times).any():
            out.append(FitShape(r.shape, configs, times))
    return out


def prior_log_us(d: Prepared, coefficients: dict[str, float]) -> np.ndarray:
    """log(model µs) + correction; configs that cannot launch get +inf (never chosen)."""
    coef = np.array([coefficients.get(n, 0.0) for n in d.names])
    return np.where(d.fits, d.log_predicted + d.x @ coef, np.inf)


def recorded_measure(d: Prepared) -> tuple[list, Callable[[list], list[Trial]]]:
    """Recorded shape `d`'s launchable configs (as `rooftune tune` sees them, in the space's order) and a measurer
    that replays their recorded times (a failed trial where none was recorded)."""
    keep = np.flatnonzero(d.fits)
    configs = [d.source.configs[i] for i in keep]
    times = {c: d.source.time_us[i] for c, i in zip(configs, keep)}

    def measure(batch):
        return [Trial(c, float(times[c])) if math.isfinite(times[c]) else Trial(c, None, error="failed")
                for c in batch]

    return configs, measure


def replay_search(d: Prepared, coefficients: dict[str, float], settings: SearchSettings,
                  budget: int = max(CV_BUDGETS), pick: dict[str, float] | None = None,
                  vote: np.ndarray | None = None, weights: VoteSettings | None = None) -> list[Trial]:
    """The search on one recorded shape (launchable configs only, as `rooftune tune` sees them), first
    measuring the best by `coefficients` + `pick` where a pick correction is given; with a neighbour `vote` (one
    value per config of the shape), its `weights` added to the search's and the pick's priors."""
    keep = np.flatnonzero(d.fits)
    configs, measure = recorded_measure(d)
    prior = prior_log_us(d, coefficients)[keep]
    own = prior_log_us(d, pick_coefficients(coefficients, pick))[keep] if pick else prior
    if vote is not None:
        prior, own = prior + weights.w_search * vote[keep], own + weights.w_pick * vote[keep]
    first = int(np.argmin(own)) if not np.array_equal(own, prior) else None
    return search(configs, prior, measure, budget, settings, first)


def prefix_scores(d: Prepared, trials: list[Trial], budgets: Sequence[int]) -> list[float]:
    """best recorded / best of the first B trials, per budget B (0 when none succeeded)."""
    best = float(np.nanmin(d.source.time_us))
    out = []
    for b in budgets:
        ok = [t.time_us for t in trials[:b] if t.ok]
        out.append(best / min(ok) if ok else 0.0)
    return out


@dataclass(frozen=True)
class Candidate:
    ridge: RidgeSettings
    search: SearchSettings
    pick: PickSettings | None = None
    vote: VoteSettings | None = None


def describe(cand: Candidate) -> str:
    """One line of a candidate setting, as `rooftune fit` lists them."""
    vote = (f", vote of {cand.vote.k} (weight {cand.vote.w_pick:g} in the pick, {cand.vote.w_search:g} in the search)"
            if cand.vote else "")
    return (f"ridge {cand.ridge.ridge:g}, weight {cand.ridge.near_best_weight:g}, pick {'own' if cand.pick else 'ridge'}, "
            f"κ {cand.search.kappa:g}, length {cand.search.length_scale:g}, prior sd {cand.search.prior_sd:g}{vote}")


@dataclass(frozen=True)
class Fitted:
    """A residual's coefficients and its pick's change (empty: none)."""

    coefficients: dict[str, float]
    pick: dict[str, float]


def fit_residual(data: Sequence[Prepared], ridge: RidgeSettings, pick: PickSettings | None) -> Fitted:
    coefficients = fit_coefficients(data, ridge)
    return Fitted(coefficients, fit_pick(data, coefficients, pick) if pick is not None else {})


def fold_group(shape) -> tuple | None:
    """What a fold keeps together: a fused-MoE shape's layer (experts, top-k, hidden, intermediate), since its
    held-out list is split by model and a fold must not see the layer it is scored on; None (each shape on its
    own) for the other kernels, whose held-out shapes are drawn one by one (the family's `fold_keys`)."""
    return kernel_of(shape).fold_group(shape)


def fold_groups(shapes: Sequence) -> list[tuple] | None:
    """Each shape's `fold_group`, where they group (every shape has one, two groups at least); else None."""
    groups = [fold_group(s) for s in shapes]
    return groups if all(g is not None for g in groups) and len(set(groups)) >= 2 else None


def fold_assignment(data: Sequence[Prepared], folds: int = FOLDS) -> list[list[int]]:
    """The held-back indices of each fold: shapes dealt round-robin from a seeded permutation, or, where
    `fold_groups` groups them, whole groups dealt so (leave-one-group-out with at most `folds` groups)."""
    groups = fold_groups([d.source.shape for d in data])
    if groups is None:
        order = np.random.default_rng(FOLD_SEED).permutation(len(data))
        return [order[f::folds].tolist() for f in range(min(folds, len(data)))]
    names = sorted(set(groups))
    order = np.random.default_rng(FOLD_SEED).permutation(len(names))
    dealt = [{names[i] for i in order[f::folds]} for f in range(min(folds, len(names)))]
    return [[i for i, g in enumerate(groups) if g in held] for held in dealt]


def fold_fits(data: list[Prepared], ridge: RidgeSettings, pick: PickSettings | None,
              folds: int = FOLDS, also: Sequence[Prepared] = ()) -> list[tuple[list[int], Fitted]]:
    """Per fold (`fold_assignment` over `data`): its held-back shapes, and the residual fitted on the others and on
    `also` (another GPU's training shapes, prepared with that GPU's profile: in every fold's fit, never held back)."""
    out = []
    for test in fold_assignment(data, folds):
        held = set(test)
        out.append((test, fit_residual([d for i, d in enumerate(data) if i not in held] + list(also), ridge, pick)))
    return out


def cross_validate(data: list[Prepared], candidate: Candidate, folds: int = FOLDS,
                   budgets: Sequence[int] = CV_BUDGETS, fits: list[tuple[list[int], Fitted]] | None = None,
                   votes: dict[int, np.ndarray] | None = None) -> dict[int, dict[str, float]]:
    """Per budget, summary (mean, p10, worst-decile mean) of held-back-fold scores. `fits`: the folds'
    residuals where already fitted (`fold_fits` of the candidate's ridge and pick settings); `votes`: each
    shape's neighbour vote from the other folds (`fold_votes` of the candidate's k), where it has a vote."""
    fits = fits if fits is not None else fold_fits(data, candidate.ridge, candidate.pick, folds)
    scores = np.zeros((len(data), len(budgets)))
    for test, fitted in fits:
        for i in test:
            vote = votes[i] if candidate.vote is not None else None
            trials = replay_search(data[i], fitted.coefficients, candidate.search, pick=fitted.pick, vote=vote,
                                   weights=candidate.vote)
            scores[i] = prefix_scores(data[i], trials, budgets)
    return {b: summarize(scores[:, j]) for j, b in enumerate(budgets)}


def shape_neighbour(d: Prepared) -> Neighbour | None:
    """A training shape's entry in the vote: its TOP fastest launchable configs' regrets (None: none ran)."""
    regret = top_regrets(d.source.configs, d.source.time_us, d.fits, TOP)
    return Neighbour(d.source.shape, regret) if regret else None


def predicted_regret(d: Prepared, coefficients: dict[str, float], configs: Sequence) -> np.ndarray:
    """The corrected model's regret on recorded shape `d` of `configs` (NaN where `d` cannot launch one): what
    NeighbourTable.predicted computes live, from the prepared features."""
    prior = prior_log_us(d, coefficients)
    relative = np.where(np.isfinite(prior), prior - prior[np.isfinite(prior)].min(), np.nan)
    index = {c: i for i, c in enumerate(d.source.configs)}
    return np.array([relative[index[c]] if c in index else np.nan for c in configs])


def fold_votes(data: list[Prepared], fits: list[tuple[list[int], Fitted]], k: int,
               profile: HardwareProfile) -> dict[int, np.ndarray]:
    """Each held-back shape's vote (one value per config of it) by its `k` nearest shapes of the other folds, their
    misses measured against the fold's residual (roofline/neighbours.py)."""
    entries = [shape_neighbour(d) for d in data]
    points = np.stack([point(d.source.shape, profile) for d in data])
    out = {}
    for test, fitted in fits:
        held_back = set(test)
        pool = [j for j in range(len(data)) if j not in held_back and entries[j] is not None]
        for i in test:
            configs = data[i].source.configs
            near = [pool[n] for n in nearest(points[pool], points[i], k)]
            rows = [misses(entries[j], configs, predicted_regret(data[j], fitted.coefficients, configs)) for j in near]
            out[i] = combine(np.stack(rows)) if rows else np.zeros(len(configs))
    return out


def objective(cv: dict[int, dict[str, float]]) -> float:
    """What CV maximizes: the mean plus the worst-decile mean, summed over budgets."""
    return sum(s["mean"] + s["worst_decile_mean"] for s in cv.values())


def candidates_grid(base: SearchSettings = SearchSettings()) -> list[Candidate]:
    keys = list(SEARCH_GRID)
    out = []
    for ridge, pick in itertools.product(RIDGE_GRID, PICK_GRID):
        for values in itertools.product(*(SEARCH_GRID[k] for k in keys)):
            out.append(Candidate(ridge, replace(base, **dict(zip(keys, values))), pick))
    return out


@dataclass(frozen=True)
class FitReport:
    residual: Residual
    chosen: Candidate
    cv: dict[int, dict[str, float]]
    tried: list[tuple[Candidate, float]]
    tried_votes: list[tuple[Candidate, float]] = ()


def choose_setting(data: list[Prepared], grid: list[Candidate], progress=None, also: Sequence[Prepared] = ()):
    """The grid's setting with the best CV objective: (it, its CV, every (setting, objective) tried, its folds' fits);
    `also`: shapes in every fold's fit, never scored (`fold_fits`)."""
    tried, best = [], None
    fits: dict[tuple, list] = {}  # the folds' residuals depend on the ridge and pick settings only
    for cand in grid:
        key = (cand.ridge, cand.pick)
        if key not in fits:
            fits[key] = fold_fits(data, cand.ridge, cand.pick, also=also)
        cv = cross_validate(data, cand, fits=fits[key])
        score = objective(cv)
        tried.append((cand, score))
        if best is None or score > best[1]:
            best = (cand, score, cv)
        if progress:
            progress(cand, score)
    chosen, _, cv = best
    return chosen, cv, tried, fits[(chosen.ridge, chosen.pick)]


def choose_vote(kernel: str, data: list[Prepared], chosen: Candidate, cv: dict, fits: list, profile: HardwareProfile,
                grid: Sequence[VoteSettings] = VOTE_GRID, progress=None):
    """`chosen` with the neighbour vote of `grid` whose CV objective beats it alone the most, with its CV and every
    (setting, objective) tried; `chosen` and `cv` as they are where none beats it or `kernel` has no coordinates."""
    tried, best = [], (chosen, objective(cv), cv)
    if not has_vote(kernel) or len(fits) < 2 or not all(of_space(kernel, d.source.configs) for d in data):
        return chosen, cv, tried  # (another kernel's log, as the AutoHeuristic ones: no vote there)
    votes: dict[int, dict] = {}  # each shape's vote depends on k only
    for vote in grid:
        if vote.k not in votes:
            votes[vote.k] = fold_votes(data, fits, vote.k, profile)
        cand = replace(chosen, vote=vote)
        cv_vote = cross_validate(data, cand, fits=fits, votes=votes[vote.k])
        tried.append((cand, objective(cv_vote)))
        if tried[-1][1] > best[1]:
            best = (cand, tried[-1][1], cv_vote)
        if progress:
            progress(cand, tried[-1][1])
    return best[0], best[2], tried


def neighbour_table(kernel: str, profile: HardwareProfile, data: list[Prepared], vote: VoteSettings,
                    residual: Residual, data_label: str) -> NeighbourTable:
    """The shipped vote: every training shape's entry, beside `residual` (its misses are measured against it)."""
    entries = tuple(e for e in (shape_neighbour(d) for d in data) if e is not None)
    return NeighbourTable(kernel, profile.name, profile.sm_count, ranking_digest(residual), vote, entries,
                          {"data": data_label, "shapes": len(entries), "top": TOP})


@dataclass(frozen=True)
class AlsoData:
    """Another GPU's training shapes fitted beside `profile`'s own (a residual of both GPUs): each prepared with its
    own GPU's profile, in every fit and fold, never scored; the CV figures stay those of the fitted GPU's shapes."""

    shapes: list[FitShape]
    profile: HardwareProfile
    label: str


def fit_kernel(kernel: str, shapes: list[FitShape], profile: HardwareProfile, data_label: str,
               grid: list[Candidate] | None = None, progress=None,
               vote_grid: Sequence[VoteSettings] | None = None, also: Sequence[AlsoData] = ()) -> FitReport:
    """Choose a setting by cross-validation, then the neighbour vote beside it; refit the residual on every shape,
    return it (with its neighbour table where the vote gained) and the CV figures. `also`: other GPUs' training
    shapes in every fit (the vote's neighbours stay this GPU's: their regrets were measured here)."""
    if len(shapes) < 2:
        raise FitError(f"{data_label}: fitting needs at least 2 shapes with measurements, got {len(shapes)}")
    data = prepare(shapes, profile)
    extra = [d for a in also for d in prepare(a.shapes, a.profile)]
    grid = grid or candidates_grid()
    chosen, alone, tried, fits = choose_setting(data, grid, progress, also=extra)
    chosen, cv, tried_votes = choose_vote(kernel, data, chosen, alone, fits, profile,
                                          VOTE_GRID if vote_grid is None else vote_grid, progress)
    fitted = fit_residual(data + extra, chosen.ridge, chosen.pick)
    fit = {"data": data_label, "shapes": len(shapes), "folds": FOLDS, "fold_seed": FOLD_SEED,
           "folds_by": "shape" if fold_groups([s.shape for s in shapes]) is None else "layer",
           "ridge": chosen.ridge.ridge, "near_best_weight": chosen.ridge.near_best_weight,
           "pick": None if chosen.pick is None else asdict(chosen.pick),
           "vote": None if chosen.vote is None else asdict(chosen.vote),
           "settings_tried": len(grid), "votes_tried": len(tried_votes),
           "cv": {str(b): {k: round(v, 4) for k, v in s.items()} for b, s in cv.items()}}
    if also:
        fit["also"] = [{"data": a.label, "gpu": a.profile.name, "shapes": len(a.shapes)} for a in also]
    if chosen.vote is not None:
        fit["cv_without_vote"] = {str(b): {k: round(v, 4) for k, v in s.items()} for b, s in alone.items()}
    residual = make_residual(kernel, profile, fitted.coefficients, chosen.search.to_dict(), fit, fitted.pick)
    if chosen.vote is not None:
        residual = replace(residual, neighbours=neighbour_table(kernel, profile, data, chosen.vote, residual, data_label))
    return FitReport(residual, chosen, cv, tried, tried_votes)


def fitted_residual(report: FitReport, shapes: list[FitShape], manifest: dict) -> Residual:
    """`report`'s refit residual with what `eval` and `tune` read from its record: the static list learned on
    `shapes` (the `static` baseline of `rooftune eval`), the data's space version (the residual describes
    rooftune's kernel over this space: it applies to data of that space only) and the Triton release that
    compiled them (`tune` uses it under another only once `--check` says so)."""
    residual = report.residual
    residual.fit["static_list"] = [str(c) for c in learn_static(shapes)]
    residual.fit["space_version"] = manifest.get("space_version")
    triton = (manifest.get("device") or {}).get("triton")
    if triton:
        residual.fit["triton"] = [triton_release(triton)]
    return residual


@dataclass(frozen=True)
class ResidualCheck:
    """How a residual ranks on training data measured under another Triton release: the search replayed
    with it and with the model alone at CV_BUDGETS (mean score per budget), and whether it ranks well:
    at least as well as the model alone on average over the budgets."""

    triton: str
    residual_mean: dict[int, float]
    model_mean: dict[int, float]

    @property
    def ranks_well(self) -> bool:
        return np.mean(list(self.residual_mean.values())) >= np.mean(list(self.model_mean.values()))

    def as_dict(self, data_label: str) -> dict:
        return {"data": data_label, "ranks_well": bool(self.ranks_well),
                "residual": {str(b): round(v, 4) for b, v in self.residual_mean.items()},
                "model": {str(b): round(v, 4) for b, v in self.model_mean.items()}}


def model_alone_means(records, profile: HardwareProfile, budgets: Sequence[int] = CV_BUDGETS) -> dict[int, float]:
    """The model alone's mean score on `records` at each of `budgets`: `rooftune`'s search with no residual (nothing
    is fitted, so its score on training shapes is as honest as a cross-validated one)."""
    methods = {"model": rooftune_strategy(None)}
    return {b: evaluate(records, b, profile, methods)["methods"]["model"]["mean"] for b in budgets}


def fit_against_model(report: FitReport, residual: Residual, records,
                      profile: HardwareProfile) -> tuple[Residual, ResidualCheck]:
    """The fitted residual's cross-validated means beside the model alone's on the same training data: `residual`
    with them recorded (`fit.model_alone`; a new record, the given one unchanged) and the check, whose `ranks_well`
    is the rule a residual ships by under its release (the one `--check` applies: at least as well as the model alone
    on average over the budgets), else that release keeps the model alone."""
    model = model_alone_means(records, profile, list(report.cv))
    recorded = replace(residual, fit={**residual.fit, "model_alone": {str(b): round(v, 4) for b, v in model.items()}})
    triton = residual.tritons[0] if residual.tritons else ""
    return recorded, ResidualCheck(triton, {b: s["mean"] for b, s in report.cv.items()}, model)


def check_residual(residual: Residual, records, profile: HardwareProfile, triton: str) -> ResidualCheck:
    """Replay `rooftune`'s search on `records` (training data measured under Triton `triton`) with
    `residual` (each shape left out of its neighbour vote) and with the model alone, at every CV budget."""
    methods = {"residual": rooftune_strategy(residual, leave_own_out=True), "model": rooftune_strategy(None)}
    means = {name: {} for name in methods}
    for budget in CV_BUDGETS:
        summary = evaluate(records, budget, profile, methods)["methods"]
        for name in methods:
            means[name][budget] = summary[name]["mean"]
    return ResidualCheck(triton_release(triton), means["residual"], means["model"])


def check_plan(kernel: str, profile: HardwareProfile, manifest: dict, check: str, out: str | os.PathLike | None,
               data_label: str) -> tuple[Residual, Path, bool]:
    """`rooftune fit --check CHECK` on training data with `manifest`: the residual to check (`check`: a path, or
    'shipped': the one fitted under the newest release other than the data's), where it goes where it ranks well
    (`out`; default: in place, or, for another GPU's residual, this GPU's shipped file of its release) and whether
    it is another GPU's. FitError where the data record no Triton release or the residual cannot be checked."""
    triton = (manifest.get("device") or {}).get("triton")
    if not triton:
        raise FitError(f"{data_label}: its manifest records no Triton version to check the residual under")
    source = check_source(kernel, profile, triton) if check == SHIPPED else Path(check)
    if source is None:
        raise FitError(f"no residual of {kernel} on {profile.name} is shipped for a Triton release other than the "
                       f"data's ({triton_release(triton)}): fit one on them instead (`rooftune fit {kernel} --out shipped`)")
    residual = read_residual(source)
    if residual.kernel != kernel:
        raise FitError(f"{source}: a residual for {residual.kernel}, not {kernel}")
    if residual.fit.get("space_version") != manifest.get("space_version"):
        raise FitError(f"{source} was fitted over {residual.fit.get('space_version')}; {data_label} is over "
                       f"{manifest.get('space_version')}: fit a new residual instead")
    # A residual of another GPU checked on this one's data (an SM partition, a sibling GPU): where it ranks well,
    # it is written as this GPU's, so `tune --gpu` and `eval --gpu` of this profile use it. It must already rank
    # under the data's release on its own GPU. Its neighbour vote stays behind: its regrets were measured there.
    other_gpu = residual.profile != profile.name
    if other_gpu:
        residual = residual.without_vote()
    why = residual.mismatch(manifest.get("space_version"), triton) if other_gpu else None
    if why:
        raise FitError(f"{source} was {why}: check it under that Triton on {residual.profile}'s own data first")
    release = residual.tritons[0] if residual.tritons else triton
    target = (fit_target(kernel, profile, str(out), triton) if out is not None
              else shipped_residual_path(kernel, profile, release) if other_gpu else source)
    return residual, target, other_gpu


def with_check(residual: Residual, check: ResidualCheck, data_label: str, gpu: str | None = None) -> Residual:
    """`residual` recording `check`; where it ranks well, its Triton releases gain the checked one, so
    `tune` and the PyTorch ops use it under that release too. `gpu`: the check was on another GPU's training
    data (a profile of that name) under a release the residual already ranks for: recorded under `gpu_checks`."""
    fit = dict(residual.fit)
    if gpu is not None:
        fit["gpu_checks"] = {**fit.get("gpu_checks", {}), gpu: check.as_dict(data_label)}
        return replace(residual, fit=fit)
    fit["triton_checks"] = {**fit.get("triton_checks", {}), check.triton: check.as_dict(data_label)}
    if check.ranks_well and check.triton not in residual.tritons:
        fit["triton"] = [*residual.tritons, check.triton]
    return replace(residual, fit=fit)
