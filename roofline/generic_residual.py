"""The generic model's residual: a small linear correction of log(measured / predicted time) over features of the
generic breakdown that mean the same for any kernel, fitted across the training kernels of a suite dataset
(tuner/generic_fitting.py; never on held-out kernels) and shipped per GPU and Triton release as
hwprofiles/residuals/triton-<release>/generic-<profile>.json (roofline/releases.py's folders).

corrected log time = log(model time) + Σ coefficient · feature. As the family residuals (roofline/residual.py):
ranking is within one call, so a constant per call never matters and there is no intercept; fractions are terms
over the predicted time, logs are base 2 and centred (4 warps, 3 stages), so a coefficient reads "per doubling".
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rooftune.candidates.kernel_counts import KernelCounts
from rooftune.hwprofiles import HardwareProfile
from rooftune.inputs import read_json
from rooftune.outputs import write_atomic
from rooftune.roofline.generic import GenericBreakdown
from rooftune.roofline.releases import release_folder, release_order, residuals_root
from rooftune.roofline.residual import (
    COEFFICIENT_LIMIT,
    ResidualError,
    occupancy_features,
    residual_file_name,
    triton_release,
)

GENERIC_RESIDUAL_FORMAT = "rooftune-generic-residual-1"
# Bump when a feature's definition changes: a residual fitted on other features cannot be applied.
GENERIC_FEATURES_VERSION = "generic-features-1"
GENERIC_KERNEL = "generic"  # the residual's name in the shipped folders: generic-<profile>.json


def generic_features(bd: GenericBreakdown, counts: Sequence[KernelCounts]) -> tuple[tuple[str, ...], np.ndarray]:
    """(names, X[config, feature]) of the configs of one call with the generic model's breakdown `bd`."""
    t = bd.time_us
    warps = np.array([k.compiled.num_warps for k in counts], dtype=float)
    stages = np.array([k.compiled.num_stages for k in counts], dtype=float) - 3.0
    log_warps = np.log2(np.maximum(warps, 1.0)) - 2.0
    base = {
        "tensor_frac": bd.compute_us / t, "vector_frac": bd.vector_us / t, "sfu_frac": bd.sfu_us / t,
        "smem_frac": bd.smem_us / t, "l2_frac": bd.l2_us / t, "memory_frac": bd.memory_us / t,
        "latency_frac": bd.latency_us / t, "serial_frac": bd.serial_us / t, "launch_frac": bd.launch_us / t,
        **occupancy_features(bd),
        "log_imbalance": np.log2(bd.imbalance), "wgmma": bd.uses_wgmma.astype(float),
        "log_warps": log_warps, "log_warps_sq": log_warps ** 2, "stages": stages, "stages_sq": stages ** 2,
        "regs": bd.regs_per_thread / 255.0, "log_spill": np.log2(1.0 + bd.local_bytes_per_thread) / 10.0,
        "log_programs": (np.log2(np.maximum(bd.programs, 1)) - 10.0) / 4.0,
    }
    return FEATURE_NAMES, np.stack([np.asarray(base[n], dtype=float) for n in FEATURE_NAMES], axis=1)


# The features, in the order of a residual's coefficients.
FEATURE_NAMES = ("tensor_frac", "vector_frac", "sfu_frac", "smem_frac", "l2_frac", "memory_frac", "latency_frac",
                 "serial_frac", "launch_frac", "occupancy", "ctas_per_sm", "log_waves", "wave_eff", "log_imbalance", "wgmma",
                 "log_warps", "log_warps_sq", "stages", "stages_sq", "regs", "log_spill", "log_programs")


@dataclass(frozen=True)
class GenericResidual:
    """A fitted correction of the generic model on one GPU: coefficients by feature name, and what it was fitted
    on (the dataset, its training kernels, the Triton release, cross-validated scores)."""

    profile: str
    coefficients: dict[str, float]
    fit: dict = field(default_factory=dict)
    features_version: str = GENERIC_FEATURES_VERSION

    def correction(self, bd: GenericBreakdown, counts: Sequence[KernelCounts]) -> np.ndarray:
        """Additive corrections to log(predicted time), one per config."""
        names, x = generic_features(bd, counts)
        return x @ np.array([self.coefficients.get(n, 0.0) for n in names])

    def contributions(self, bd: GenericBreakdown, counts: Sequence[KernelCounts], top: int = 5) -> list:
        """Per config, the `top` largest terms of the correction (feature, coefficient · value), for `explain`."""
        names, x = generic_features(bd, counts)
        terms = x * np.array([self.coefficients.get(n, 0.0) for n in names])
        order = np.argsort(-np.abs(terms), axis=1)[:, :top]
        return [[(names[j], float(terms[i, j])) for j in row] for i, row in enumerate(order)]


def generic_residual_to_dict(residual: GenericResidual) -> dict:
    return {"format": GENERIC_RESIDUAL_FORMAT, "kernel": GENERIC_KERNEL, "profile": residual.profile,
            "features_version": residual.features_version, "coefficients": residual.coefficients, "fit": residual.fit}


def generic_residual_from_dict(data, origin: str) -> GenericResidual:
    """A generic residual from its JSON, validated: its format, features' version, finite coefficients within
    ±COEFFICIENT_LIMIT for exactly the features (ResidualError naming what is wrong)."""
    if not isinstance(data, dict) or data.get("format") != GENERIC_RESIDUAL_FORMAT:
        raise ResidualError(f"{origin}: not a rooftune generic residual (expected format {GENERIC_RESIDUAL_FORMAT!r})")
    if data.get("features_version") != GENERIC_FEATURES_VERSION:
        raise ResidualError(f"{origin}: fitted on features {data.get('features_version')!r}, this rooftune computes "
                            f"{GENERIC_FEATURES_VERSION!r}; refit it (`rooftune fit generic`)")
    coefficients = data.get("coefficients")
    if not isinstance(coefficients, dict) or set(coefficients) != set(FEATURE_NAMES):
        raise ResidualError(f"{origin}: its coefficients are not the {len(FEATURE_NAMES)} generic features")
    for name, value in coefficients.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or abs(value) > COEFFICIENT_LIMIT:
            raise ResidualError(f"{origin}: coefficient {name} = {value!r} is not a finite number within "
                                f"±{COEFFICIENT_LIMIT:g}; a damaged residual: refit it")
    return GenericResidual(str(data.get("profile", "")), {k: float(v) for k, v in coefficients.items()},
                           dict(data.get("fit", {})))


def read_generic_residual(path: str | os.PathLike) -> GenericResidual:
    return generic_residual_from_dict(read_json(path, ResidualError, "no such residual file"), str(path))


def write_generic_residual(residual: GenericResidual, path: str | os.PathLike) -> None:
    """Written whole or not at all (rooftune/outputs.py)."""
    write_atomic(path, json.dumps(generic_residual_to_dict(residual), indent=1) + "\n")


def shipped_generic_path(profile: HardwareProfile, release: str) -> os.PathLike:
    """Where the generic residual of `profile`'s GPU fitted under Triton `release` is shipped."""
    return release_folder(release) / residual_file_name(GENERIC_KERNEL, profile)


def shipped_generic_residual(profile: HardwareProfile, triton: str | None) -> GenericResidual | None:
    """The shipped generic residual of `profile`'s GPU fitted under Triton `triton`'s release (under any, the
    newest, where `triton` is None); None where none is shipped (the model alone ranks)."""
    name = residual_file_name(GENERIC_KERNEL, profile)
    root = residuals_root()
    releases = sorted((p.name.split("-", 1)[1] for p in root.glob("triton-*") if (p / name).is_file()),
                      key=release_order) if root.is_dir() else []
    if triton is not None:
        releases = [r for r in releases if r == triton_release(triton)]
    return read_generic_residual(shipped_generic_path(profile, releases[-1])) if releases else None
