"""The neighbour vote: where the corrected model missed on the training shapes nearest a new one, added to the
zero-trial pick and to the search's prior.

A residual's neighbour table (a small JSON beside it: `neighbours-<kernel>-<GPU>.json`, fitted by tuner/fitting.py
on the training shapes only) holds each training shape and the regret, log(time / its best), of its TOP fastest
configs. For a new shape, the `k` training shapes nearest it in its family's coordinates (KernelSpec `neighbours`:
GEMM's log2 M, N, K, output tiles per SM and arithmetic intensity over the ridge point) each say how far the
model × residual missed on the configs the new shape can run:

    miss_j(c) = regret_j(c) − predicted_j(c)                 c among j's TOP
              = max(bound_j − predicted_j(c), 0)             c launchable on j but slower than its TOP (bound_j, its
                                                             TOP-th regret, is a lower bound on c's regret)
              = not known                                    c not launchable on j

predicted_j(c) = prior_j(c) − min prior_j over j's launchable configs: the corrected model's regret of c on j (its
search coefficients). vote(c) is the mean miss over the neighbours that know c (the mean of every known miss where
none does). The zero-trial pick ranks by its prior + w_pick · vote, the search by its prior + w_search · vote.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from rooftune.candidates import (
    KERNELS,
    Config,
    ConfigError,
    ShapeError,
    check_in_grid,
    configs_to_columns,
    header_shape,
    illegal_mask,
    kernel_of,
    load_implementation,
    shape_header,
)
from rooftune.hwprofiles import HardwareProfile
from rooftune.inputs import check_input, read_text
from rooftune.outputs import write_atomic

NEIGHBOURS_FORMAT = "rooftune-neighbours-1"
# Configs kept per training shape: the ones that compete for first place (the table stays ~100 KB for 120 shapes).
TOP = 30
# A regret is stored to 1e-4 (0.01%, under the sweeps' measurement noise); past REGRET_LIMIT (e^10 slower than the
# best) it is no measurement.
REGRET_DIGITS = 4
REGRET_LIMIT = 10.0
# GEMM's coordinates count output tiles of this side, whatever the config: how many waves the shape fills.
WAVE_TILE = 128


class NeighbourError(ValueError):
    """A neighbour table that cannot be used."""


@dataclass(frozen=True)
class VoteSettings:
    """How many neighbours vote, and the vote's weight in the zero-trial pick and in the search's prior
    (cross-validated on train: tuner/fitting.py VOTE_GRID)."""

    k: int = 5
    w_pick: float = 0.5
    w_search: float = 0.5


@dataclass(frozen=True)
class Neighbour:
    """One training shape and the regret, log(time / best), of its TOP fastest configs."""

    shape: object
    regret: Mapping[Config, float]

    @property
    def bound(self) -> float:
        """The largest listed regret: a lower bound on the regret of any launchable config not listed."""
        return max(self.regret.values())


def gemm_point(shape, profile: HardwareProfile) -> np.ndarray:
    """GEMM's coordinates: log2 M, N, K; log2 of WAVE_TILE² output tiles per SM (the waves a shape fills); log2 of
    its arithmetic intensity (FLOPs / bytes of A, B and C once) over the profile's ridge point (bf16 rate ÷ DRAM
    bandwidth, FLOP/byte)."""
    m, n, k = shape.m, shape.n, shape.k
    tiles = math.ceil(m / WAVE_TILE) * math.ceil(n / WAVE_TILE)
    intensity = m * n * k / (m * k + n * k + m * n)  # 2mnk FLOPs over 2-byte elements
    ridge = profile.bf16_tflops * 1e12 / (profile.dram_bw_gbps * 1e9)
    return np.array([math.log2(m), math.log2(n), math.log2(k), math.log2(tiles / profile.sm_count),
                     math.log2(intensity / ridge)])


def attention_point(shape, profile: HardwareProfile) -> np.ndarray:
    """Attention's coordinates: log2 of batch × heads, of the sequence, of head_dim and of the grouped-query ratio."""
    return np.array([math.log2(shape.batch * shape.heads), math.log2(shape.seq), math.log2(shape.head_dim),
                     math.log2(shape.heads // shape.kv_heads)])


def has_vote(kernel: str) -> bool:
    """Whether `kernel`'s family has coordinates for the vote (KernelSpec `neighbours`)."""
    return KERNELS[kernel].neighbours is not None


def of_space(kernel: str, configs: Sequence[Config]) -> bool:
    """Whether `configs` are configs of `kernel`'s space (its parameters): a vote records regrets of those only (a
    user's list, another kernel's log, have no regret recorded)."""
    return bool(configs) and set(configs[0].kernel_params()) == set(KERNELS[kernel].space.param_names)


def point(shape, profile: HardwareProfile) -> np.ndarray:
    """`shape`'s coordinates in its family's neighbour space."""
    return load_implementation(kernel_of(shape).neighbours)(shape, profile)


def nearest(points: np.ndarray, at: np.ndarray, k: int) -> np.ndarray:
    """Indices of the `k` rows of `points` nearest `at` (Euclidean; ties by index)."""
    distance = np.sqrt(((points - at) ** 2).sum(axis=1))
    return np.argsort(distance, kind="stable")[:k]


def top_regrets(configs: Sequence[Config], time_us: np.ndarray, launchable: np.ndarray, top: int = TOP) -> dict:
    """The regret of the `top` fastest launchable configs that ran (fastest first); empty where none ran."""
    t = np.where(launchable, time_us, np.nan)
    ran = np.flatnonzero(np.isfinite(t) & (t > 0))
    order = ran[np.argsort(t[ran], kind="stable")][:top]
    return {configs[i]: round(float(np.log(t[i] / t[order[0]])), REGRET_DIGITS) for i in order}


def misses(neighbour: Neighbour, configs: Sequence[Config], predicted: np.ndarray) -> np.ndarray:
    """miss_j(c) over `configs` (the module's docstring); `predicted`: the model's regret of each on the neighbour,
    NaN where it cannot launch there."""
    listed = np.array([neighbour.regret.get(c, np.nan) for c in configs])
    unlisted = np.maximum(neighbour.bound - predicted, 0.0)
    return np.where(np.isnan(predicted), np.nan, np.where(np.isnan(listed), unlisted, listed - predicted))


def combine(rows: np.ndarray) -> np.ndarray:
    """vote(c): the mean of rows[:, c] over the neighbours that know c; the mean of every known miss where none
    does (0 where nothing is known)."""
    known = ~np.isnan(rows)
    count = known.sum(axis=0)
    total = np.where(known, rows, 0.0).sum(axis=0)
    neutral = float(total.sum() / count.sum()) if count.sum() else 0.0
    return np.where(count > 0, total / np.maximum(count, 1), neutral)


# prior_on(shape, columns, profile) -> (log corrected µs, launchable) of the configs `columns` on `shape`
PriorOn = Callable[..., tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class NeighbourTable:
    """A residual's neighbour vote: its training shapes' top configs, the settings cross-validation chose, the
    residual it was fitted beside (`residual`: its digest) and how it was fitted (`fit`)."""

    kernel: str
    profile: str
    sm_count: int
    residual: str
    settings: VoteSettings
    neighbours: tuple[Neighbour, ...]
    fit: dict = field(default_factory=dict)
    # min prior per (neighbour shape, profile): computed once, shared with `without`'s tables
    best_prior: dict = field(default_factory=dict, compare=False, repr=False)

    def without(self, shape) -> NeighbourTable:
        """The table without `shape`'s entry: the vote a new shape gets (a training shape is its own nearest
        neighbour, so a route or check fitted on training shapes leaves it out)."""
        return replace(self, neighbours=tuple(n for n in self.neighbours if n.shape != shape))

    def nearest_to(self, shape, profile: HardwareProfile) -> list[Neighbour]:
        """The `k` training shapes nearest `shape`."""
        if not self.neighbours:
            return []
        points = np.stack([point(n.shape, profile) for n in self.neighbours])
        return [self.neighbours[i] for i in nearest(points, point(shape, profile), self.settings.k)]

    def applies(self, configs: Sequence[Config], profile: HardwareProfile) -> bool:
        """Whether the vote knows `configs` on `profile`: configs of its family's space (a user's list without the
        space's parameters has no regret recorded), on the GPU its regrets were measured on (another one, an SM
        partition of it, `--sms`, ranks its configs otherwise)."""
        return (profile.name, profile.sm_count) == (self.profile, self.sm_count) and of_space(self.kernel, configs)

    def vote(self, shape, configs: Sequence[Config], profile: HardwareProfile, prior_on: PriorOn) -> np.ndarray:
        """vote(c) for each of `configs` of `shape`, the neighbours' corrected model being `prior_on`; zeros where
        the vote does not apply (`applies`)."""
        if not self.applies(configs, profile):
            return np.zeros(len(configs))
        columns = configs_to_columns(list(configs))
        rows = [misses(n, configs, self.predicted(n.shape, columns, profile, prior_on))
                for n in self.nearest_to(shape, profile)]
        return combine(np.stack(rows)) if rows else np.zeros(len(configs))

    def predicted(self, shape, columns: dict, profile: HardwareProfile, prior_on: PriorOn) -> np.ndarray:
        """The corrected model's regret on neighbour `shape` of the configs `columns`: prior − the least prior of its
        launchable configs; NaN where the space's legality or the model rules a config out there."""
        space = kernel_of(shape).space
        prior, launchable = prior_on(shape, columns, profile)
        illegal, _ = illegal_mask(space, shape, columns, profile)
        key = (shape, id(profile))
        if key not in self.best_prior or self.best_prior[key][0] is not profile:
            grid = space.all_columns()
            grid_illegal, _ = illegal_mask(space, shape, grid, profile)
            legal = {name: column[~grid_illegal] for name, column in grid.items()}
            all_prior, all_launchable = prior_on(shape, legal, profile)
            self.best_prior[key] = (profile, float(np.min(all_prior[all_launchable])))
        return np.where(illegal | ~launchable, np.nan, prior - self.best_prior[key][1])


def neighbours_file(residual_path: str | os.PathLike) -> Path:
    """Where the neighbour table of the residual at `residual_path` lies: beside it, 'neighbours-' + its name."""
    path = Path(residual_path)
    return path.with_name(f"neighbours-{path.name}")


def table_to_dict(table: NeighbourTable) -> dict:
    """The file's JSON: the configs the table names once, as rows of the space's parameters then num_warps and
    num_stages, and per training shape its header fields and [config row, regret] pairs, fastest first."""
    names = list(KERNELS[table.kernel].space.param_names)
    configs = list(dict.fromkeys(c for n in table.neighbours for c in n.regret))
    index = {c: i for i, c in enumerate(configs)}
    return {"format": NEIGHBOURS_FORMAT, "kernel": table.kernel, "profile": table.profile, "sm_count": table.sm_count,
            "residual": table.residual,
            "settings": {"k": table.settings.k, "w_pick": table.settings.w_pick, "w_search": table.settings.w_search},
            "params": names + ["num_warps", "num_stages"],
            "configs": [[c[name] for name in names] + [c.num_warps, c.num_stages] for c in configs],
            "shapes": [{"shape": shape_header(n.shape), "regret": [[index[c], r] for c, r in n.regret.items()]}
                       for n in table.neighbours],
            "fit": table.fit}


def _settings(data: dict, origin: str) -> VoteSettings:
    s = data.get("settings")
    if not isinstance(s, dict) or set(s) != {"k", "w_pick", "w_search"}:
        raise NeighbourError(f"{origin}: 'settings' must hold exactly k, w_pick and w_search")
    k, weights = s["k"], (s["w_pick"], s["w_search"])
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise NeighbourError(f"{origin}: settings k = {k!r} must be a whole number >= 1")
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise NeighbourError(f"{origin}: a vote weight = {w!r} must be a finite number >= 0")
    return VoteSettings(k, float(weights[0]), float(weights[1]))


def _configs(data: dict, kernel: str, origin: str) -> list[Config]:
    names = list(KERNELS[kernel].space.param_names)
    if data.get("params") != names + ["num_warps", "num_stages"]:
        raise NeighbourError(f"{origin}: 'params' must be the {kernel} space's parameters then num_warps and "
                             f"num_stages ({', '.join(names)}, ...); a table of another space: refit it")
    rows = data.get("configs")
    if not isinstance(rows, list):
        raise NeighbourError(f"{origin}: 'configs' must be a list of rows")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(names) + 2 or any(
                isinstance(v, bool) or not isinstance(v, int) for v in row):
            raise NeighbourError(f"{origin}: config row {i} must be {len(names) + 2} whole numbers, got {row!r}")
        config = Config(tuple(zip(names, row[:-2])), row[-2], row[-1])
        try:
            check_in_grid(KERNELS[kernel].space, config)
        except ConfigError as exc:
            raise NeighbourError(f"{origin}: config row {i}: {exc}") from None
        out.append(config)
    return out


def _neighbour(entry, kernel: str, configs: list[Config], origin: str) -> Neighbour:
    where = f"{origin}: shape entry {entry.get('shape') if isinstance(entry, dict) else entry!r}"
    if not isinstance(entry, dict) or not isinstance(entry.get("shape"), dict) or not isinstance(entry.get("regret"), list):
        raise NeighbourError(f"{where}: each entry needs a 'shape' object and a 'regret' list")
    try:
        shape = header_shape(entry["shape"])
    except (ShapeError, ConfigError, TypeError, ValueError) as exc:
        raise NeighbourError(f"{where}: not a shape ({exc})") from None
    if kernel_of(shape).name != kernel:
        raise NeighbourError(f"{where}: a shape of {kernel_of(shape).name}, in a table of {kernel}")
    regret = {}
    for pair in entry["regret"]:
        ok = (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int) and not isinstance(pair[0], bool)
              and 0 <= pair[0] < len(configs) and isinstance(pair[1], (int, float)) and not isinstance(pair[1], bool)
              and math.isfinite(pair[1]) and 0 <= pair[1] <= REGRET_LIMIT)
        if not ok:
            raise NeighbourError(f"{where}: {pair!r} is not [a config row's index, a regret in 0..{REGRET_LIMIT:g}]")
        regret[configs[pair[0]]] = float(pair[1])
    if not regret or min(regret.values()) != 0.0:
        raise NeighbourError(f"{where}: its regrets must include its best config's, 0")
    return Neighbour(shape, regret)


def table_from_dict(data: dict, origin: str) -> NeighbourTable:
    """A neighbour table from its JSON, validated: the format, a family with a vote, its settings, configs of its
    space, shapes of its family with regrets in range."""
    if not isinstance(data, dict) or data.get("format") != NEIGHBOURS_FORMAT:
        raise NeighbourError(f"{origin}: not a rooftune neighbour table (expected format {NEIGHBOURS_FORMAT!r})")
    kernel = data.get("kernel")
    if kernel not in KERNELS or not has_vote(kernel):
        raise NeighbourError(f"{origin}: a table for kernel {kernel!r}; the vote has coordinates for "
                             f"{', '.join(k for k in KERNELS if has_vote(k))}")
    sms = data.get("sm_count")
    if (not isinstance(data.get("profile"), str) or not isinstance(data.get("residual"), str)
            or isinstance(sms, bool) or not isinstance(sms, int) or sms < 1):
        raise NeighbourError(f"{origin}: needs the 'profile', its 'sm_count' and the 'residual' it was fitted for")
    if not isinstance(data.get("shapes"), list) or not data["shapes"] or not isinstance(data.get("fit", {}), dict):
        raise NeighbourError(f"{origin}: needs a non-empty 'shapes' list (and 'fit', where given, an object)")
    configs = _configs(data, kernel, origin)
    neighbours = tuple(_neighbour(entry, kernel, configs, origin) for entry in data["shapes"])
    return NeighbourTable(kernel, data["profile"], sms, data["residual"], _settings(data, origin), neighbours,
                          dict(data.get("fit", {})))


def read_table(path: str | os.PathLike) -> NeighbourTable:
    path = check_input(path)  # a pipe or device: never opened (it would block)
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise NeighbourError(f"{path}: not valid JSON ({exc})") from exc
    return table_from_dict(data, str(path))


def write_table(table: NeighbourTable, path: str | os.PathLike) -> None:
    """Write whole or not at all (rooftune/outputs.py). One line per config and shape: small, and diffs read."""
    data = table_to_dict(table)
    lines = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in data.items()
                       if k not in ("configs", "shapes"))
    rows = ",\n".join(f"  {json.dumps(row)}" for row in data["configs"])
    shapes = ",\n".join(f"  {json.dumps(entry)}" for entry in data["shapes"])
    write_atomic(path, "{\n" + lines + f',\n "configs": [\n{rows}\n ],\n "shapes": [\n{shapes}\n ]\n}}\n')
