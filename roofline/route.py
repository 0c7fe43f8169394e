"""The untuned route: a ridge model of log(library time ÷ the zero-trial pick's time) over a shape's features
and the pick's model time, fitted per kernel and GPU (tuner/routing.py) and stored as JSON beside the residuals.

An untuned op (nothing measured) runs the library's op (cuBLAS, SDPA) unless the predicted gain of the kernel's
zero-trial pick, log(library µs / pick µs), exceeds the route's `margin`: a mistaken library route costs nothing
against the library, a mistaken kernel route can cost a lot, so the margin (chosen by cross-validation on the
training shapes) keeps the kernel only where it is confidently faster.

The features are the shape's own (log2 sizes centred on the middle of the lists, their squares and products;
rows whose length is not a multiple of 8 elements, which the library's vectorized paths handle poorly) and two
of the roofline's: the ideal time max(FLOPs / peak, bytes / DRAM bandwidth) of the shape on the profile, and the
model's time of the pick over it (how far from the roofline the model puts the kernel). A route says which of
them it was fitted on.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rooftune.candidates import kernel_of, kernel_spec, load_implementation
from rooftune.hwprofiles import HardwareProfile
from rooftune.outputs import write_atomic
from rooftune.roofline.releases import route_release, shipped_route_path
from rooftune.roofline.residual import ResidualError, triton_release

ROUTE_FORMAT = "rooftune-route-1"
ROUTE_FEATURES_VERSION = "route-features-1"
_ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# Rows whose length is not a multiple of this many elements (16 bytes of bf16) leave vectorized loads.
_ALIGN_ELEMENTS = 8


@dataclass(frozen=True)
class RouteFeatures:
    """A kernel family's part of the route (its registration's `route`): its shape's log2 sizes centred on the
    middle of the lists (`logs`), its own further features (`extra`), how many elements its operands and output
    hold (`elements`, for the roofline's floor), and the feature sets cross-validation chooses among (`grid`)."""

    logs: Callable[..., dict[str, float]]
    extra: Callable[..., dict[str, float]]
    elements: Callable[..., int]
    grid: tuple[tuple[str, ...], ...]


_ROOFLINE = ("log_ideal", "log_model_over_ideal")
_GEMM_BASE = ("log_m", "log_n", "log_k", "n_unaligned", "k_unaligned")
_GEMM_SQUARES = ("log_m^2", "log_n^2", "log_k^2")
_GEMM_CROSS = ("log_m*log_n", "log_m*log_k", "log_n*log_k")
_ATTENTION_BASE = ("log_bh", "log_seq", "log_head_dim", "log_gqa")
_ATTENTION_MORE = ("log_seq^2", "log_bh*log_seq", "log_seq*log_head_dim", "log_bh^2")

GEMM_ROUTE = RouteFeatures(
    logs=lambda s: {"log_m": math.log2(s.m) - 7.0, "log_n": math.log2(s.n) - 12.0, "log_k": math.log2(s.k) - 12.0},
    extra=lambda s: {"n_unaligned": float(s.n % _ALIGN_ELEMENTS != 0), "k_unaligned": float(s.k % _ALIGN_ELEMENTS != 0)},
    elements=lambda s: s.m * s.k + s.n * s.k + s.m * s.n,                                    # A, B, C
    grid=(_GEMM_BASE, _GEMM_BASE + _GEMM_SQUARES, _GEMM_BASE + _GEMM_SQUARES + _GEMM_CROSS,
          _GEMM_BASE + _GEMM_SQUARES + _GEMM_CROSS + _ROOFLINE, _GEMM_BASE + _ROOFLINE))
ATTENTION_ROUTE = RouteFeatures(
    logs=lambda s: {"log_bh": math.log2(s.batch * s.heads) - 8.0, "log_seq": math.log2(s.seq) - 10.0,
                    "log_head_dim": math.log2(s.head_dim) - 7.0},
    extra=lambda s: {"log_gqa": math.log2(s.heads // s.kv_heads)},
    elements=lambda s: s.batch * s.seq * s.head_dim * (2 * s.heads + 2 * s.kv_heads),         # Q, K, V, O
    grid=(_ATTENTION_BASE, _ATTENTION_BASE + _ATTENTION_MORE, _ATTENTION_BASE + _ATTENTION_MORE + _ROOFLINE,
          ("log_seq", "log_head_dim") + _ROOFLINE))


def route_part(kernel: str) -> RouteFeatures:
    """The family's route features (its registration's `route`); ResidualError where it has none (no PyTorch op)."""
    spec = kernel_spec(kernel)
    if spec.route is None:
        raise ResidualError(f"the {spec.label} family has no untuned route (no PyTorch op runs it)")
    return load_implementation(spec.route)


def ideal_us(shape, profile: HardwareProfile) -> float:
    """The roofline's floor in µs: max(FLOPs / tensor peak, bytes moved once / DRAM bandwidth); the bytes are
    the operands read and the output written (the family's `elements`)."""
    size = _ELEMENT_BYTES.get(shape.dtype, 2)
    flops_us = shape.flops / (profile.tensor_tflops(shape.dtype) * 1e6)
    bytes_us = route_part(kernel_of(shape).name).elements(shape) * size / (profile.dram_bw_gbps * 1e3)
    return max(flops_us, bytes_us)


def _crossed(logs: dict[str, float]) -> dict[str, float]:
    """The logs, their squares ('x^2') and pairwise products ('x*y')."""
    names = list(logs)
    out = dict(logs)
    out.update({f"{a}^2": logs[a] ** 2 for a in names})
    out.update({f"{a}*{b}": logs[a] * logs[b] for i, a in enumerate(names) for b in names[i + 1:]})
    return out


def route_features(shape, pick_model_us: float, profile: HardwareProfile) -> dict[str, float]:
    """Every feature a route may use, by name, for `shape` whose zero-trial pick the model puts at
    `pick_model_us` µs on `profile`."""
    part = route_part(kernel_of(shape).name)
    floor = ideal_us(shape, profile)
    return {**_crossed(part.logs(shape)), **part.extra(shape), "log_ideal": math.log(floor),
            "log_model_over_ideal": math.log(max(pick_model_us, 1e-9) / floor)}


@dataclass(frozen=True)
class Route:
    """A fitted route for one kernel on one GPU: standardized ridge coefficients over `features`, the
    `margin` the predicted log gain must exceed to keep the kernel, and what it was fitted on (`fit`)."""

    kernel: str
    profile: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coefficients: tuple[float, ...]
    intercept: float
    margin: float
    fit: dict = field(default_factory=dict)

    def gain(self, values: dict[str, float]) -> float:
        """Predicted log(library µs / pick µs) from the features `values` (route_features)."""
        x = np.array([values[n] for n in self.features])
        z = (x - np.array(self.mean)) / np.array(self.scale)
        return float(self.intercept + z @ np.array(self.coefficients))

    def keeps_kernel(self, values: dict[str, float]) -> bool:
        return self.gain(values) > self.margin

    def mismatch(self, space_version: str | None, triton: str | None = None) -> str | None:
        """Why this route does not apply to the kernel over `space_version` under Triton `triton`, or None."""
        if self.fit.get("space_version") != space_version:
            return f"fitted over {self.fit.get('space_version')}, not {space_version}"
        tritons = tuple(self.fit.get("triton", ()))
        if triton is not None and tritons and triton_release(triton) not in tritons:
            return f"fitted under Triton {', '.join(tritons)}, not {triton_release(triton)}"
        return None


def route_to_dict(route: Route) -> dict:
    return {"format": ROUTE_FORMAT, "features_version": ROUTE_FEATURES_VERSION, "kernel": route.kernel,
            "profile": route.profile, "features": list(route.features), "mean": list(route.mean),
            "scale": list(route.scale), "coefficients": list(route.coefficients), "intercept": route.intercept,
            "margin": route.margin, "fit": route.fit}


def route_from_dict(data: dict, origin: str) -> Route:
    if not isinstance(data, dict) or data.get("format") != ROUTE_FORMAT:
        raise ResidualError(f"{origin}: not a rooftune route (expected format {ROUTE_FORMAT!r})")
    if data.get("features_version") != ROUTE_FEATURES_VERSION:
        raise ResidualError(f"{origin}: fitted on route features {data.get('features_version')!r}, this rooftune "
                            f"computes {ROUTE_FEATURES_VERSION!r}; refit with `rooftune fit {data.get('kernel')} --route`")
    try:
        sizes = {len(data[k]) for k in ("features", "mean", "scale", "coefficients")}
        if len(sizes) != 1:
            raise ValueError("features, mean, scale and coefficients differ in length")
        return Route(str(data["kernel"]), str(data["profile"]), tuple(str(n) for n in data["features"]),
                     tuple(float(v) for v in data["mean"]), tuple(float(v) for v in data["scale"]),
                     tuple(float(v) for v in data["coefficients"]), float(data["intercept"]),
                     float(data["margin"]), dict(data.get("fit", {})))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResidualError(f"{origin}: malformed route ({exc})") from exc


def load_route(kernel: str, profile: HardwareProfile, path: str | os.PathLike | None = None,
               release: str | None = None) -> Route | None:
    """The route at `path`, else the route of this kernel on this profile's GPU shipped in Triton `release`'s
    folder (None: the newest release's that holds one; roofline/releases.py), or None where none is shipped there
    (an untuned op runs the kernel)."""
    release = release or route_release(kernel, profile, None)
    if path is None and release is None:
        return None
    source = Path(path) if path is not None else shipped_route_path(kernel, profile, release)
    if path is None and not source.is_file():
        return None
    try:
        return route_from_dict(json.loads(source.read_text()), str(source))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResidualError(f"{source}: not a readable route ({exc})") from exc


def write_route(route: Route, path: str | os.PathLike) -> None:
    write_atomic(path, json.dumps(route_to_dict(route), indent=1) + "\n")
