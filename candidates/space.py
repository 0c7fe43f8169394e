"""Search spaces: a parameter grid, a legality rule against a hardware profile, and a version."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from rooftune.candidates.config import Config, ConfigError
from rooftune.hwprofiles import HardwareProfile

# legality(shape, columns, profile) -> {reason: mask of configs rejected for that reason}
LegalityRule = Callable[[object, dict[str, np.ndarray], HardwareProfile], dict[str, np.ndarray]]


class NoLegalConfigError(ValueError):
    """A shape none of whose space's configs is legal on a profile (each over one of the GPU's limits)."""


def no_legal_config(kernel: str, shape, profile: HardwareProfile) -> NoLegalConfigError:
    """The error of a shape of `kernel` that has no legal config on `profile`."""
    return NoLegalConfigError(f"no legal {kernel} config for {shape} on {profile.name}")


@dataclass(frozen=True)
class SearchSpace:
    """A published search space. `grid` is ((name, (values...)), ...) in kernel-argument order,
    ending with num_warps and num_stages; `rules_version` changes whenever the legality rule does."""

    kernel: str
    grid: tuple[tuple[str, tuple[int, ...]], ...]
    legality: LegalityRule
    rules_version: str

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.grid]

    @property
    def param_names(self) -> list[str]:
        """Kernel parameters, without num_warps and num_stages."""
        return [n for n in self.names if n not in ("num_warps", "num_stages")]

    @property
    def version(self) -> str:
        """Content hash of the grid and the legality rules; datasets record it."""
        blob = json.dumps([self.kernel, [[n, list(v)] for n, v in self.grid], self.rules_version])
        return f"{self.kernel}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"

    def all_columns(self) -> dict[str, np.ndarray]:
        """The full grid (legal or not) as columns, in itertools.product's order (the last parameter varies
        fastest). A mesh, not a list of tuples: the GEMM grid's 192,000 rows take milliseconds, not 0.15 s."""
        grids = np.meshgrid(*(np.asarray(v, dtype=np.int64) for _, v in self.grid), indexing="ij")
        return {name: grid.ravel() for name, grid in zip(self.names, grids)}


@dataclass(frozen=True)
class LegalSet:
    """The legal configs of a space for one shape and profile, with why the others were rejected."""

    configs: list[Config]
    columns: dict[str, np.ndarray]
    total: int
    rejected: dict[str, int]  # reason -> configs rejected for it (a config may count under several)

    def __len__(self) -> int:
        return len(self.configs)


def columns_to_configs(space: SearchSpace, columns: dict[str, np.ndarray]) -> list[Config]:
    params = space.param_names
    n = len(next(iter(columns.values()))) if columns else 0
    return [
        Config(tuple((p, int(columns[p][i])) for p in params),
               int(columns["num_warps"][i]), int(columns["num_stages"][i]))
        for i in range(n)
    ]


def illegal_mask(space: SearchSpace, shape, columns: Mapping[str, np.ndarray],
                 profile: HardwareProfile) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Which configs of `columns` `space.legality` rejects for `shape` on `profile` (for any reason), and each
    reason's own mask."""
    reasons = space.legality(shape, columns, profile)
    illegal = np.zeros(len(columns[space.names[0]]), dtype=bool)
    for mask in reasons.values():
        illegal |= mask
    return illegal, reasons


def legal_configs(space: SearchSpace, shape, profile: HardwareProfile) -> LegalSet:
    """Enumerate `space` and keep what `space.legality` allows for `shape` on `profile`."""
    columns = space.all_columns()
    illegal, reasons = illegal_mask(space, shape, columns, profile)
    keep = {name: col[~illegal] for name, col in columns.items()}
    return LegalSet(
        configs=columns_to_configs(space, keep),
        columns=keep,
        total=int(illegal.size),
        rejected={reason: int(mask.sum()) for reason, mask in reasons.items()},
    )


def config_legality(space: SearchSpace, shape, config: Config, profile: HardwareProfile) -> list[str]:
    """Reasons `config` is illegal for `shape` (empty when legal). Parameters outside the grid
    values are allowed here: legality is physics, the grid is a choice."""
    missing = set(space.names) - set(config)
    if missing:
        raise KeyError(f"config lacks {', '.join(sorted(missing))} for space {space.kernel}")
    columns = {name: np.array([config[name]], dtype=np.int64) for name in space.names}
    return [reason for reason, mask in space.legality(shape, columns, profile).items() if mask[0]]


def check_in_grid(space: SearchSpace, config: Mapping[str, int], complete: bool = True) -> None:
    """Raise ConfigError naming the first parameter of `config` whose value is not one of `space`'s
    published values: the model and the legality rules are defined on the grid only (outside it a
    negative BLOCK_M predicts a negative time, BLOCK_M=0 NaN); then a parameter the space does not have; then
    (with `complete`: every parameter must be there) a missing one, which a bad value may be the reason for."""
    for name, values in space.grid:
        if name in config and config[name] not in values:
            raise ConfigError(f"{name}={config[name]} is not in the {space.kernel} space; "
                              f"{name} is one of {', '.join(map(str, values))}")
    unknown = [name for name in config if name not in space.names]
    if unknown:
        raise ConfigError(f"{unknown[0]} is not a parameter of the {space.kernel} space (its parameters: "
                          f"{', '.join(space.names)})")
    missing = [name for name, _ in space.grid if name not in config]
    if complete and missing:
        raise ConfigError(f"{space.kernel} config lacks {', '.join(missing)}")


THREADS_PER_WARP = 32


def thread_limits(regs_per_thread: np.ndarray, num_warps: np.ndarray,
                  profile: HardwareProfile) -> dict[str, np.ndarray]:
    """The legality rules every space shares, of a block's threads against one SM: its registers (per thread over
    the limit, or the block's over the SM's file) and its warps (more threads than an SM holds: such a block never
    becomes resident; occupancy would count it as one anyway)."""
    threads = np.asarray(num_warps) * THREADS_PER_WARP
    return {
        "registers over the per-thread limit": (regs_per_thread > profile.regs_per_thread_max)
        | (regs_per_thread * threads > profile.regs_per_sm),
        "more threads than an SM holds": threads > profile.max_threads_per_sm,
    }


def next_pow2(x: np.ndarray | int) -> np.ndarray:
    """Smallest power of two >= x (elementwise; x >= 1)."""
    x = np.maximum(np.asarray(x, dtype=np.int64), 1)
    return (1 << np.ceil(np.log2(x)).astype(np.int64)).astype(np.int64)


def cdiv(a, b):
    """Ceiling division for integers or integer arrays."""
    return -(-np.asarray(a) // np.asarray(b))
