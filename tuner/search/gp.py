"""rooftune's search: the zero-trial pick first, then rounds chosen by a per-shape Gaussian process.

The prior belief about every legal config's log time is the model's prediction plus the residual
correction (roofline/residual.py). Measured configs update that belief through a Gaussian process
over the configs' parameters: configs near a measured one (a doubled tile, one more stage, the other
GROUP_M) move with it, distant ones keep their prior. Each round measures the configs with the lowest
lower confidence bound, mean − κ·sd (promising, or uncertain), chosen together as a batch (a chosen
config's variance shrinks before the next is picked: the "kriging believer"), so a live tune compiles
each round in parallel. The first config of the first round is the zero-trial pick: the prior's best,
or the caller's `first` (by the residual's pick correction: roofline/residual.py), followed by the
round's own choices.

The sequence of rounds does not depend on the budget, so a budget-N search is the first N trials of
a longer one. κ, the length scale and the prior sd are chosen by cross-validation on the training set
(tuner/fitting.py) and stored with the residual; the round sizes, the noise and offset sds and the
failure penalty are fixed here (cross-validation varied the round sizes and the two sds and moved the
score by less than its noise; the failure penalty was not varied). Rounds of 8, 6 and 6 (3 rounds for
20 trials) replaced rounds of 4 (5 rounds): a live tune waits for one round's compiles and timing at
a time, and on the GEMM training set the CV figures at 1, 5, 10 and 20 configs moved by at most 0.0015.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import scipy.linalg

from rooftune.candidates import KERNELS, Config, MeasureBatch, Trial, configs_to_columns
from rooftune.candidates.gemm_space import tile_cols

# Configs a live search asks its measurer to compile ahead: the prior's best, which later rounds
# mostly draw from (in replay on the GEMM training set, 0.9 of a shape's 20 trials lie outside the
# prior's first 40). Compiling them costs idle workers only; it changes no choice.
PREFETCH = 40
# Log-time penalty given to a config that failed (compile error, resources, reference check): its
# neighbours become less attractive without being ruled out.
FAILED_PENALTY = 1.0


@dataclass(frozen=True)
class SearchSettings:
    """The search's constants (cross-validated on train; stored with the residual)."""

    first_round: int = 8        # configs measured before the first update
    round_size: int = 6         # configs per later round
    prior_sd: float = 0.1       # sd of the residual the GP learns per shape (log time)
    length_scale: float = 2.0   # in doublings of a tile side, stages, warps, GROUP_M on/off
    offset_sd: float = 0.3      # sd of a shape-wide shift of every config's log time
    noise_sd: float = 0.01      # measurement noise (log time)
    kappa: float = 1.0          # lower confidence bound: mean − κ·sd

    @classmethod
    def from_dict(cls, d: dict) -> SearchSettings:
        known = {f.name: f.type for f in fields(cls)}
        return cls(**{k: (int(v) if known[k] == "int" else float(v)) for k, v in d.items() if k in known})

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# MoE's GROUP_SIZE_M {1, 16, 32, 64}: log2 / 4, so that grouping on (16) is one unit from off (1), as the
# GEMM's GROUP_M > 1, and the three group sizes are near neighbours (0.25 apart), not one point.
GROUP_SIZE_SCALE = 4.0


def config_embedding(configs: list[Config]) -> np.ndarray:
    """Coordinates in which the GP measures distance: log2 of BLOCK_M, the tile's columns (BLOCK_N +
    BLOCK_N2), BLOCK_K and SPLIT_K, num_stages, 8 warps (0/1), GROUP_M > 1 (0/1; MoE's GROUP_SIZE_M as
    log2 / GROUP_SIZE_SCALE), attention's ORDER, TMA, GEMM's PERSISTENT and a composite tile (BLOCK_N2 > 0).
    A family's own names take their GEMM names (its registry entry's `gemm_names`: MoE's BLOCK_SIZE_M/N/K are
    BLOCK_M/N/K). Parameters a space lacks count as 0."""
    c = configs_to_columns(configs)
    c.update({gemm: c.pop(own) for spec in KERNELS.values() for own, gemm in spec.gemm_names if own in c})
    n = len(configs)

    def col(name, f):
        return f(c[name]).astype(float) if name in c else np.zeros(n)

    cols = np.log2(tile_cols(c)).astype(float) if "BLOCK_N" in c else np.zeros(n)
    group = (col("GROUP_M", lambda v: v > 1) if "GROUP_M" in c
             else col("GROUP_SIZE_M", lambda v: np.log2(v) / GROUP_SIZE_SCALE))
    return np.stack([col("BLOCK_M", np.log2), cols, col("BLOCK_K", np.log2),
                     col("SPLIT_K", np.log2), col("num_stages", lambda v: v), col("num_warps", lambda v: v == 8),
                     group, col("ORDER", lambda v: v), col("TMA", lambda v: v),
                     col("PERSISTENT", lambda v: v), col("BLOCK_N2", lambda v: v > 0)], axis=1)


class Belief:
    """GP posterior over every candidate's log time, given the prior mean and the measured configs."""

    def __init__(self, prior: np.ndarray, embedding: np.ndarray, s: SearchSettings):
        self.prior = prior
        self.z = embedding / s.length_scale
        self.s = s
        self.seen: list[int] = []
        self.y: list[float] = []
        self._columns: dict[int, np.ndarray] = {}  # index -> its covariance with every candidate

    def copy(self) -> Belief:
        other = Belief.__new__(Belief)
        other.prior, other.z, other.s = self.prior, self.z, self.s
        other.seen, other.y, other._columns = list(self.seen), list(self.y), self._columns
        return other

    def _column(self, i: int) -> np.ndarray:
        """k(zᵢ, z) = prior_sd² · exp(−|zᵢ − z|² / 2) + offset_sd² (the shape-wide shift)."""
        if i not in self._columns:
            d2 = ((self.z - self.z[i]) ** 2).sum(axis=1)
            self._columns[i] = self.s.prior_sd ** 2 * np.exp(-0.5 * d2) + self.s.offset_sd ** 2
        return self._columns[i]

    def add(self, index: int, log_time: float) -> None:
        self.seen.append(index)
        self.y.append(log_time)

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sd) of every candidate's log time."""
        prior_var = self.s.prior_sd ** 2 + self.s.offset_sd ** 2
        if not self.seen:
            return self.prior, np.full(self.prior.shape, math.sqrt(prior_var))
        idx = np.array(self.seen)
        k_star = np.stack([self._column(i) for i in self.seen])          # [seen, candidate]
        k = k_star[:, idx] + self.s.noise_sd ** 2 * np.eye(len(idx))

        chol_inv = scipy.linalg.solve_triangular(np.linalg.cholesky(k), np.eye(len(idx)), lower=True)
        v = chol_inv @ k_star                                             # L⁻¹ K*
        alpha = chol_inv.T @ (chol_inv @ (np.array(self.y) - self.prior[idx]))
        var = np.maximum(prior_var - (v ** 2).sum(axis=0), 1e-12)
        return self.prior + alpha @ k_star, np.sqrt(var)


def next_round(belief: Belief, size: int, kappa: float) -> list[int]:
    """`size` unmeasured candidates by lowest mean − κ·sd, each chosen as if the previous ones had been
    measured at their posterior mean (their neighbours' sd shrinks; means stay)."""
    mean, _ = belief.posterior()
    fantasy = belief.copy()
    picks: list[int] = []
    for _ in range(size):
        _, sd = fantasy.posterior()
        bound = mean - kappa * sd
        bound[fantasy.seen] = np.inf
        i = int(np.argmin(bound))
        if not np.isfinite(bound[i]):
            break
        picks.append(i)
        fantasy.add(i, float(mean[i]))
    return picks




def search(candidates: list[Config], prior_log_us: np.ndarray, measure: MeasureBatch, budget: int,
           settings: SearchSettings, first: int | None = None) -> list[Trial]:
    """Measure at most `budget` of `candidates` (prior_log_us: corrected predicted log time of each) in
    rounds: `first` (the index of the zero-trial pick; default the prior's best), then the rest of the
    `first_round` by the prior, then GP rounds of `round_size`. Returns the trials in the order measured."""
    if not candidates or budget < 1:
        return []
    belief = Belief(np.asarray(prior_log_us, dtype=float), config_embedding(candidates), settings)
    trials: list[Trial] = []
    # With nothing measured every sd is equal: the round starts at the prior's best and spreads away
    # from it by the same bound. A given `first` goes before the round's own choices, which keep their
    # order (so a budget-N search stays the prefix of a longer one); spreading the round away from the
    # pick instead did no better at 5, 10 and 20 configs in cross-validation on the GEMM training set.
    size = min(settings.first_round, budget, len(candidates))
    batch = next_round(belief, size, settings.kappa)
    if first is not None:
        batch = [first] + [i for i in batch if i != first][:size - 1]
    prefetch = getattr(measure, "prefetch", None)
    if prefetch is not None:  # a live measurer compiles the first round while it starts CUDA
        ahead = [int(i) for i in np.argsort(belief.prior, kind="stable")[:PREFETCH]] if budget > len(batch) else []
        prefetch([candidates[i] for i in batch + [i for i in ahead if i not in batch]])
    while batch:
        measured = measure([candidates[i] for i in batch])
        for i, trial in zip(batch, measured):
            trials.append(trial)
            belief.add(i, math.log(trial.time_us) if trial.ok else belief.prior[i] + FAILED_PENALTY)
        left = min(budget - len(trials), len(candidates) - len(trials))
        if left <= 0:
            break
        if left == len(candidates) - len(trials):
            # The budget covers every candidate left: measured all at once, best prior first. The order cannot
            # change which is fastest, and the GP's rounds (each cubic in the trials) would take minutes.
            seen = set(belief.seen)
            batch = [int(i) for i in np.argsort(belief.prior, kind="stable") if int(i) not in seen]
            continue
        batch = next_round(belief, min(settings.round_size, left), settings.kappa)
    return trials
