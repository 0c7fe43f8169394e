"""Neighbour vote for the zero-trial pick and the search's first rounds: a cross-validated prototype.

Training data only (datasets/h200/gemm/train): the same 5 folds as `rooftune fit` (tuner/fitting.py
`fold_assignment`), the residual refitted per fold with the shipped setting, and every score the replayed search
(`tuner/search/gp.py`) on the held-back fold. Nothing here reads a held-out dataset.

score(c) = log model µs(c) + residual(c) + w · vote(c),
vote(c)  = Σ_j a_j · r_j(c) / Σ_j a_j over the k training shapes j nearest the new one (other folds only),
r_j(c)   = log(time_j(c) / best_j) where c is among j's `top` fastest, else j's fill (its `top`-th regret + pad).
"""

from __future__ import annotations

import math
from pathlib import Path
from dataclasses import dataclass

import numpy as np

from rooftune.candidates import Trial
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings, prepare
from rooftune.roofline.residual import read_residual
from rooftune.tuner.fitting import (
    Candidate,
    cross_validate,
    fit_shapes_from_records,
    fold_fits,
    prefix_scores,
    prior_log_us,
)
from rooftune.tuner.search.gp import SearchSettings, search

BUDGETS = (1, 5, 10, 20)
ROOT = Path(__file__).resolve().parents[2]


def load(data: str = "datasets/h200/gemm/train", kernel: str = "gemm", gpu: str = "h200", residual: str | None = None):
    """Prepared training shapes, the profile, the shipped candidate (its ridge, pick and search settings) and the
    folds' residuals fitted with it."""
    assert "heldout" not in data, "the prototype reads training data only"
    profile = load_profile(gpu)
    shapes = fit_shapes_from_records(load_records(ROOT / data, kernel=kernel))
    data_ = prepare(shapes, profile)
    shipped = read_residual(residual or ROOT / f"hwprofiles/residuals/triton-3.6/{kernel}-NVIDIA_H200.json")
    f = shipped.fit
    pick = None
    if f.get("pick"):
        from rooftune.roofline.fit import PickSettings
        pick = PickSettings(**f["pick"])
    cand = Candidate(RidgeSettings(f["ridge"], f["near_best_weight"]), SearchSettings.from_dict(shipped.strategy), pick)
    fits = fold_fits(data_, cand.ridge, cand.pick)
    return data_, profile, cand, fits


@dataclass(frozen=True)
class Table:
    """One training shape's entry: features, and over the global config index the regret of its `top` fastest
    launchable configs, `fill` for its other launchable configs, NaN for configs it cannot run (no evidence)."""

    features: np.ndarray
    regret: np.ndarray


def shape_features(shape, profile, kind: str) -> np.ndarray:
    """log2 m, n, k; 'waves': + log2 of 128x128 output tiles per SM and log2 of the arithmetic intensity
    (flops / bytes of A, B, C once) over the profile's ridge point; 'layout': + B's layout."""
    if hasattr(shape, "seq"):   # attention
        return np.array([math.log2(shape.batch * shape.heads), math.log2(shape.seq), math.log2(shape.head_dim),
                         math.log2(shape.heads // shape.kv_heads)])
    if hasattr(shape, "experts"):   # fused MoE
        return np.array([math.log2(shape.tokens), math.log2(shape.rows / shape.experts), math.log2(shape.n),
                         math.log2(shape.k), 2.0 * (shape.gemm == "down")])
    m, n, k = shape.m, shape.n, shape.k
    out = [math.log2(m), math.log2(n), math.log2(k)]
    if "waves" in kind:
        tiles = math.ceil(m / 128) * math.ceil(n / 128)
        out.append(math.log2(tiles / profile.sm_count))
        ai = 2 * m * n * k / (2 * (m * k + n * k + m * n))
        ridge = profile.bf16_tflops * 1e12 / (profile.dram_bw_gbps * 1e9)
        out.append(math.log2(ai / ridge))
    if "layout" in kind:
        out.append(1.0 if shape.layout == "nk" else 0.0)
    return np.array(out)


INDEX: dict = {}


def config_ids(d) -> np.ndarray:
    return np.array([INDEX.setdefault(c, len(INDEX)) for c in d.source.configs])


def make_table(d, profile, kind: str, top: int, pad: float, size: int) -> Table:
    t = np.where(d.fits, d.source.time_us, np.nan)
    ok = np.flatnonzero(np.isfinite(t) & (t > 0))
    order = ok[np.argsort(t[ok], kind="stable")][:top]
    best = t[order[0]]
    ids = config_ids(d)
    regret = np.full(size, np.nan)
    reg = np.log(t[order] / best)
    regret[ids[d.fits]] = reg.max() + pad        # launchable there, not among its top: its fill
    regret[ids[order]] = reg
    return Table(shape_features(d.source.shape, profile, kind), regret)


@dataclass(frozen=True)
class Knn:
    k: int = 5
    w_pick: float = 1.0
    w_search: float = 0.0
    kind: str = "mnk"
    top: int = 30
    pad: float = 0.0
    scale: tuple = ()          # per-feature weight in the distance (default 1 each)
    bandwidth: float = 0.0     # 0: uniform over the k; else Gaussian weights exp(-d^2 / 2h^2)
    legal_only: bool = True    # a neighbour that cannot run a config says nothing of it (else: its fill)


def vote(d, tables: list[Table], profile, knn: Knn) -> np.ndarray:
    """Per config of `d` (all, launchable or not), the neighbours' weighted regret (0 where none knows it)."""
    f = shape_features(d.source.shape, profile, knn.kind)
    scale = np.array(knn.scale) if knn.scale else np.ones(len(f))
    feats = np.stack([t.features for t in tables])
    dist = np.sqrt((((feats - f) * scale) ** 2).sum(axis=1))
    near = np.argsort(dist, kind="stable")[:knn.k]
    a = np.exp(-dist[near] ** 2 / (2 * knn.bandwidth ** 2)) if knn.bandwidth > 0 else np.ones(len(near))
    ids = config_ids(d)
    r = np.stack([tables[j].regret[ids] for j in near])          # [neighbour, config]
    if not knn.legal_only:
        fills = np.nanmax(r, axis=1, keepdims=True)
        r = np.where(np.isnan(r), fills, r)
    known = ~np.isnan(r)
    wsum = (a[:, None] * known).sum(0)
    out = (a[:, None] * np.nan_to_num(r)).sum(0) / np.maximum(wsum, 1e-12)
    neutral = np.nanmean(np.where(known, r, np.nan)) if known.any() else 0.0
    return np.where(wsum > 0, out, neutral)


def replay(d, coefficients, pick, settings, v, knn: Knn, budget: int = max(BUDGETS)) -> list[Trial]:
    keep = np.flatnonzero(d.fits)
    configs = [d.source.configs[i] for i in keep]
    times = {c: d.source.time_us[i] for c, i in zip(configs, keep)}

    def measure(batch):
        return [Trial(c, float(times[c])) if math.isfinite(times[c]) else Trial(c, None, error="failed") for c in batch]

    from rooftune.roofline.residual import pick_coefficients
    base_pick = prior_log_us(d, pick_coefficients(coefficients, pick) if pick else coefficients)[keep]
    first = int(np.argmin(base_pick + knn.w_pick * v[keep]))
    prior = prior_log_us(d, coefficients)[keep] + knn.w_search * v[keep]
    return search(configs, prior, measure, budget, settings, first)


def cv_knn(data, profile, cand, fits, knn: Knn, budgets=BUDGETS, tables_cache: dict | None = None) -> dict:
    """Per budget, the summary of held-back scores with the neighbour vote (neighbours from the other folds)."""
    tables = tables_cache.get((knn.kind, knn.top, knn.pad)) if tables_cache is not None else None
    if tables is None:
        for d in data:
            config_ids(d)
        tables = [make_table(d, profile, knn.kind, knn.top, knn.pad, len(INDEX)) for d in data]
        if tables_cache is not None:
            tables_cache[(knn.kind, knn.top, knn.pad)] = tables
    scores = np.zeros((len(data), len(budgets)))
    for test, fitted in fits:
        held = set(test)
        train = [t for j, t in enumerate(tables) if j not in held]
        for i in test:
            v = vote(data[i], train, profile, knn)
            trials = replay(data[i], fitted.coefficients, fitted.pick, cand.search, v, knn, max(budgets))
            scores[i] = prefix_scores(data[i], trials, budgets)
    return {b: summarize(scores[:, j]) for j, b in enumerate(budgets)}, scores


def baseline(data, cand, fits, budgets=BUDGETS) -> dict:
    return cross_validate(data, cand, budgets=budgets, fits=fits)


def fmt(cv: dict) -> str:
    return "  ".join(f"{b}: {s['mean']:.4f}/{s['worst_decile_mean']:.4f}" for b, s in cv.items())


# --- fast budget-1 scoring and nested cross-validation -------------------------------------------------------

def pick_score(d, base_pick: np.ndarray, v: np.ndarray, w: float) -> float:
    """best / time of argmin(base_pick + w · v) over launchable configs (0 where it failed)."""
    keep = np.flatnonzero(d.fits)
    i = keep[int(np.argmin(base_pick[keep] + w * v[keep]))]
    t = d.source.time_us[i]
    return float(np.nanmin(d.source.time_us) / t) if math.isfinite(t) else 0.0


def base_pick_of(d, fitted) -> np.ndarray:
    from rooftune.roofline.residual import pick_coefficients
    return prior_log_us(d, pick_coefficients(fitted.coefficients, fitted.pick) if fitted.pick else fitted.coefficients)


def tables_for(data, profile, knn: Knn, cache: dict) -> list[Table]:
    key = (knn.kind, knn.top, knn.pad)
    if key not in cache:
        for d in data:
            config_ids(d)
        cache[key] = [make_table(d, profile, knn.kind, knn.top, knn.pad, len(INDEX)) for d in data]
    return cache[key]


def b1_scores(data, profile, fits, pool_excluded: set, vote_settings: list[Knn], ws, cache) -> dict:
    """{(vote setting, w): per-shape budget-1 scores} for the shapes of `fits`' test folds, neighbours drawn from
    shapes neither in the test fold nor in `pool_excluded`."""
    out = {}
    for knn in vote_settings:
        tables = tables_for(data, profile, knn, cache)
        per_w = {w: {} for w in ws}
        for test, fitted in fits:
            held = set(test) | pool_excluded
            pool = [t for j, t in enumerate(tables) if j not in held]
            for i in test:
                v = vote(data[i], pool, profile, knn)
                bp = base_pick_of(data[i], fitted)
                for w in ws:
                    per_w[w][i] = pick_score(data[i], bp, v, w)
        for w in ws:
            out[(knn, w)] = per_w[w]
    return out


def objective1(scores: dict) -> float:
    s = summarize(list(scores.values()))
    return s["mean"] + s["worst_decile_mean"]


def nested_b1(data, profile, cand, fits, vote_settings, ws, cache, scorer=None) -> tuple[dict, list]:
    """Budget-1 nested CV: per outer fold, the setting chosen by the inner CV on the other folds (inner residuals
    fitted on three folds, neighbours from them), then scored on the outer fold. Returns the outer scores'
    summary (w = 0 among the choices: the current pick) and the settings chosen per fold."""
    from rooftune.tuner.fitting import fit_residual
    folds = [test for test, _ in fits]
    outer_scores, chosen = {}, []
    for f, (test, fitted) in enumerate(fits):
        inner = []
        for g, tg in enumerate(folds):
            if g == f:
                continue
            keep = [d for j, d in enumerate(data) if j not in set(test) | set(tg)]
            inner.append((tg, fit_residual(keep, cand.ridge, cand.pick)))
        scorer = scorer or b1_scores
        sc = scorer(data, profile, inner, set(test), vote_settings, ws, cache)
        best = max(sc, key=lambda key: objective1(sc[key]))
        chosen.append(best)
        outer = scorer(data, profile, [(test, fitted)], set(), [best[0]], [best[1]], cache)
        outer_scores.update(outer[best])
    return summarize(list(outer_scores.values())), chosen


# --- the error vote: neighbours' misses of the corrected model, instead of their regret -----------------------

def error_row(d, table: Table, prior: np.ndarray, clip_unlisted: bool = True) -> np.ndarray:
    """Over the global index: the neighbour's censored regret minus its predicted regret (corrected model,
    relative to its predicted best), NaN where it cannot run the config. Unlisted configs (slower than its top)
    know only a lower bound on their time: their miss is max(bound − predicted, 0) with `clip_unlisted`."""
    ids = config_ids(d)
    p = np.where(d.fits, prior, np.nan)
    p = p - np.nanmin(p)
    u = table.regret[ids]
    fill = np.nanmax(u)
    e = u - p
    if clip_unlisted:
        unlisted = np.isclose(u, fill)
        e = np.where(unlisted, np.maximum(e, 0.0), e)
    out = np.full(len(table.regret), np.nan)
    out[ids] = e
    return out


def error_scores(data, profile, fits, pool_excluded: set, vote_settings: list[Knn], ws, cache,
                 clip_unlisted: bool = True) -> dict:
    """As `b1_scores`, with the error vote: each neighbour's row is its miss under the fold's residual."""
    out = {}
    for knn in vote_settings:
        tables = tables_for(data, profile, knn, cache)
        per_w = {w: {} for w in ws}
        for test, fitted in fits:
            held = set(test) | pool_excluded
            pool_ids = [j for j in range(len(data)) if j not in held]
            pool = [Table(tables[j].features, error_row(data[j], tables[j], prior_log_us(data[j], fitted.coefficients),
                                                        clip_unlisted)) for j in pool_ids]
            for i in test:
                v = vote(data[i], pool, profile, knn)
                bp = base_pick_of(data[i], fitted)
                for w in ws:
                    per_w[w][i] = pick_score(data[i], bp, v, w)
        for w in ws:
            out[(knn, w)] = per_w[w]
    return out


def cv_full(data, profile, cand, fits, knn: Knn, cache: dict, budgets=BUDGETS, mode: str = "error",
            pool_excluded: set = frozenset()) -> tuple[dict, np.ndarray]:
    """Per budget, the summary of held-back scores of the whole search with the vote (`mode`: 'error' or
    'regret') added to the pick (w_pick) and to the search's prior (w_search)."""
    tables = tables_for(data, profile, knn, cache)
    scores = np.full((len(data), len(budgets)), np.nan)
    for test, fitted in fits:
        held = set(test) | set(pool_excluded)
        pool_ids = [j for j in range(len(data)) if j not in held]
        if mode == "error":
            pool = [Table(tables[j].features, error_row(data[j], tables[j], prior_log_us(data[j], fitted.coefficients)))
                    for j in pool_ids]
        else:
            pool = [tables[j] for j in pool_ids]
        for i in test:
            v = vote(data[i], pool, profile, knn)
            trials = replay(data[i], fitted.coefficients, fitted.pick, cand.search, v, knn, max(budgets))
            scores[i] = prefix_scores(data[i], trials, budgets)
    done = ~np.isnan(scores[:, 0])
    return {b: summarize(scores[done, j]) for j, b in enumerate(budgets)}, scores
