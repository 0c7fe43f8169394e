"""The residual correction: a small linear model of log(measured / predicted time) over the model's own
breakdown, fitted per GPU (roofline/fit.py) and stored as JSON beside the hardware profiles.

corrected log time = log(model time) + Σ coefficient · feature. Every feature is a named, documented
function of one config's breakdown, its parameters, or their product with the shape's size (the
model's systematic misses depend on the regime: decode, tiny K, medium prefill; short or long
sequences, head_dim, grouped-query ratio; for fused MoE the tokens, the rows each expert gets and which
GEMM). Each kernel has its own features (its registry entry names them: GEMM_FEATURES, ATTENTION_FEATURES, MOE_FEATURES), and a residual says which
it was fitted on. Ranking happens
within one shape, so a constant per shape never matters and the residual carries no intercept.

The zero-trial pick (the first config rooftune runs, with nothing measured) ranks by the same terms
plus a few of its own (`pick`: a change to the base features' coefficients, fitted for the budget-1
score: roofline/fit.py `fit_pick`); the search's later rounds keep the ridge fit, whose corrected
times are what its Gaussian process is calibrated on. Where the residual has a neighbour table (a file beside it:
roofline/neighbours.py), both also add the training shapes' vote on where the corrected model misses.

A profile with no residual file runs the model alone. Which shipped file ranks under which Triton release:
roofline/releases.py.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from rooftune.candidates import (
    KERNELS,
    AttentionShape,
    Config,
    GemmShape,
    MoeShape,
    configs_to_columns,
    legal_configs,
    load_implementation,
)
from rooftune.candidates.gemm_space import tile_cols
from rooftune.hwprofiles import HardwareProfile, ProfileError, list_profiles, load_profile
from rooftune.hwprofiles.hwprobe import triton_release
from rooftune.inputs import check_input, read_json
from rooftune.outputs import write_atomic
from rooftune.roofline import predict
from rooftune.roofline.gemm import SPLIT_K_SUMS
from rooftune.roofline.neighbours import NeighbourError, NeighbourTable, neighbours_file, read_table, write_table

RESIDUAL_FORMAT = "rooftune-residual-1"
# Bump when a feature's definition changes: a residual fitted on other features cannot be applied.
# The features are the model's own breakdown, so a change of what a term means bumps them too
# (attention-features-2: the attention model's chain, occupancy and K/V traffic terms of 2026-12; gemm-features-2:
# the memory terms count an operand sweep once per L2 partition its readers span, roofline/gemm.py
# `partitions_spanned`).
GEMM_FEATURES_VERSION = "gemm-features-2"
ATTENTION_FEATURES_VERSION = "attention-features-2"
MOE_FEATURES_VERSION = "moe-features-1"
MOE_FP8_FEATURES_VERSION = "moe-fp8-features-1"

# Config parameters whose effect the model misjudges differently by regime: each also enters
# multiplied by the shape's log2 M, N and K (centred), so the correction can differ between decode,
# tiny-K and large prefill shapes.
_REGIME_FEATURES = ("stages", "stages_sq", "log_bm", "log_bn", "log_bk", "log_bk_sq", "warps8", "split_k",
                    "group_m", "wgmma", "log_waves", "wave_eff", "fixup")
# Centres of log2 M, N, K: the middle of the sizes LLM layers span (M 1..16K, N and K 128..64K).
_SHAPE_CENTRES = {"m": 7.0, "n": 12.0, "k": 12.0}
_SHAPE_SCALE = 7.0


def is_pick_feature(name: str) -> bool:
    """The features the pick may re-weigh: the base ones, not their products with a shape scale."""
    return "*" not in name


def occupancy_features(bd) -> dict[str, np.ndarray]:
    """The features every model's breakdown gives alike: occupancy, resident programs per SM (capped at 8, as a
    share of 8), log2 of the waves, and the waves' efficiency."""
    return {"occupancy": bd.occupancy, "ctas_per_sm": np.minimum(bd.ctas_per_sm, 8) / 8.0,
            "log_waves": np.log2(np.maximum(bd.waves, 1e-3)), "wave_eff": bd.wave_efficiency}


def _config_columns(configs: list[Config] | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return configs if isinstance(configs, dict) else configs_to_columns(configs)


def gemm_features(shape: GemmShape, configs, breakdown) -> tuple[tuple[str, ...], np.ndarray]:
    """(names, X[config, feature]) for `configs` (a list or columns) of `shape` with the model's
    `breakdown` of them. Fractions are terms over the predicted time; logs are base 2 and centred on
    the middle of the space (tile 64, 3 stages), so coefficients read as "per doubling"."""
    c = _config_columns(configs)
    bd = breakdown
    t = bd.time_us
    log_bm, log_bk = (np.log2(c[k]).astype(float) - 6.0 for k in ("BLOCK_M", "BLOCK_K"))
    log_bn = np.log2(tile_cols(c)).astype(float) - 6.0
    stages = c["num_stages"].astype(float) - 3.0
    warps8 = (c["num_warps"] == 8).astype(float)
    k_iters = np.ceil(np.ceil(shape.k / c["SPLIT_K"]) / c["BLOCK_K"])
    log_k_iters = np.log2(np.maximum(k_iters, 1.0))
    base = {
        # Share of the predicted time each term would take alone: where the model's time comes from.
        "compute_frac": bd.compute_us / t, "memory_frac": bd.memory_us / t, "latency_frac": bd.latency_us / t,
        "smem_frac": bd.smem_us / t, "l2_frac": bd.l2_us / t, "splitk_frac": bd.splitk_us / t,
        "launch_frac": bd.launch_us / t,
        **occupancy_features(bd),
        "pad_eff": bd.padding_efficiency, "wgmma": bd.uses_wgmma.astype(float), "warps8": warps8,
        "stages": stages, "stages_sq": stages ** 2,
        "log_bm": log_bm, "log_bn": log_bn, "log_bk": log_bk, "log_bk_sq": log_bk ** 2,
        "log_bm_sq": log_bm ** 2, "log_bn_sq": log_bn ** 2, "bm_x_bn": log_bm * log_bn,
        "split_k": np.log2(c["SPLIT_K"]).astype(float), "group_m": (c["GROUP_M"] > 1).astype(float),
        # Few K iterations leave deep pipelines nothing to overlap.
        "log_k_iters": log_k_iters, "stages_x_k_iters": stages * np.minimum(log_k_iters, 4.0),
        "regs": bd.regs_per_thread / 255.0, "warps8_x_tile": warps8 * (log_bm + log_bn),
        # The persistent schedule (space 3): 0 for every config of the earlier spaces, so a residual
        # fitted on them applies unchanged (its coefficient is absent, read as 0).
        "persistent": (bd.schedule == "persistent").astype(float),
        # Split-K summed inside the GEMM kernel (space 4's FIXUP): 0 for the earlier spaces, as above.
        "fixup": (bd.splitk_sum == SPLIT_K_SUMS[2]).astype(float),
        # A composite tile (space 7's BLOCK_N2 > 0: two accumulators): 0 for the earlier spaces, as above.
        "composite": (bd.accumulators > 1).astype(float),
    }
    scales = {f"log_{dim}": (np.log2(getattr(shape, dim)) - _SHAPE_CENTRES[dim]) / _SHAPE_SCALE
              for dim in ("m", "n", "k")}
    return _with_regimes(base, _REGIME_FEATURES, scales)


def _with_regimes(base: dict[str, np.ndarray], regime: tuple[str, ...],
                  scales: dict[str, float]) -> tuple[tuple[str, ...], np.ndarray]:
    """(names, X): the `base` features, then each `regime` feature times each shape scale, named
    'feature*scale' (scales in insertion order)."""
    names = list(base)
    columns = [np.asarray(base[k], dtype=float) for k in names]
    for axis, scale in scales.items():
        for k in regime:
            names.append(f"{k}*{axis}")
            columns.append(np.asarray(base[k], dtype=float) * scale)
    return tuple(names), np.stack(columns, axis=1)


# Attention's regime axes, as (centre, scale) of a log2: seq (the lists span 64..16384, so about
# ±1), head_dim (64 -> -1, 128 -> 0) and the grouped-query ratio heads / kv_heads (1, 4, 8 -> 0, 2,
# 3: per doubling). Each regime feature also enters multiplied by each axis: short sequences are
# launch- and tail-bound, long ones tensor-bound, and GQA changes how much K/V traffic a block costs.
_ATTENTION_AXES = {"seq": (10.0, 4.0), "head_dim": (7.0, 1.0), "gqa": (0.0, 1.0)}
_ATTENTION_REGIME_FEATURES = ("log_bm", "log_bn", "warps8", "stages", "tma", "order_reverse")


def attention_features(shape: AttentionShape, configs, breakdown) -> tuple[tuple[str, ...], np.ndarray]:
    """(names, X[config, feature]) for attention `configs` (a list or columns) of `shape` with the
    model's `breakdown` (roofline/attention.py). As for GEMM: fractions are terms over the predicted
    time, logs base 2 centred on the middle of the space (BLOCK_M and BLOCK_N 64, 3 stages)."""
    c = _config_columns(configs)
    bd = breakdown
    t = bd.time_us
    log_bm, log_bn = (np.log2(c[k]).astype(float) - 6.0 for k in ("BLOCK_M", "BLOCK_N"))
    stages = c["num_stages"].astype(float) - 3.0
    # Configs recorded before a parameter existed (the H200 probe: no TMA) ran its default, 0.
    order = np.asarray(c.get("ORDER", np.zeros_like(c["BLOCK_M"])))
    tma = np.asarray(c.get("TMA", np.zeros_like(c["BLOCK_M"])), dtype=float)
    base = {
        # Share of the predicted time each term would take alone (they overlap, so need not sum to 1).
        "tensor_frac": bd.compute_us / t, "softmax_frac": bd.softmax_us / t, "memory_frac": bd.memory_us / t,
        "latency_frac": bd.latency_us / t, "launch_frac": bd.launch_us / t,
        # Diagonal blocks, which run the masked loop, as a share of the key blocks visited.
        "masked_frac": bd.masked_blocks / np.maximum(bd.key_blocks, 1.0),
        **occupancy_features(bd),
        "pad_eff": bd.padding_efficiency, "wgmma": bd.uses_wgmma.astype(float),
        "warps8": (c["num_warps"] == 8).astype(float), "log_warps_along_n": np.log2(bd.warps_along_n),
        "regs": bd.regs_per_thread / 255.0,
        "stages": stages, "stages_sq": stages ** 2,
        "log_bm": log_bm, "log_bn": log_bn, "log_bm_sq": log_bm ** 2, "log_bn_sq": log_bn ** 2,
        "bm_x_bn": log_bm * log_bn,
        "order_reverse": (order & 1).astype(float), "heads_fastest": ((order >> 1) & 1).astype(float),
        # TMA's copies are asynchronous: how much deeper pipelines still help differs with them.
        "tma": tma, "tma_x_stages": tma * stages,
    }
    log_gqa = np.log2(shape.heads // shape.kv_heads)
    values = {"seq": np.log2(shape.seq), "head_dim": np.log2(shape.head_dim), "gqa": log_gqa}
    scales = {f"log_{axis}": (values[axis] - centre) / scale for axis, (centre, scale) in _ATTENTION_AXES.items()}
    return _with_regimes(base, _ATTENTION_REGIME_FEATURES, scales)


# MoE's regime axes, as (centre, scale) of a log2: tokens (vLLM's 1..4096: about ±1), the mean routed rows an
# expert gets, tokens · topk / experts (1/128 .. 1024 in the shape lists: decode pads nearly every row, prefill
# fills tiles), N and K (as GEMM's); and which GEMM (down 1, gate_up 0: the gathered rows and the routing
# weight differ). Each regime feature also enters multiplied by each axis.
_MOE_AXES = {"tokens": (6.0, 6.0), "rows_per_expert": (2.0, 8.0), "n": (12.0, 7.0), "k": (12.0, 7.0)}
_MOE_REGIME_FEATURES = ("stages", "stages_sq", "log_bm", "log_bn", "log_bk", "warps8", "group", "wgmma", "log_waves",
                        "wave_eff", "row_eff")


def moe_features(shape: MoeShape, configs, breakdown) -> tuple[tuple[str, ...], np.ndarray]:
    """(names, X[config, feature]) for fused-MoE `configs` (a list or columns, vLLM's names) of `shape` with the
    model's `breakdown` (roofline/moe.py). As for GEMM: fractions are terms over the predicted time, logs base 2
    centred on the middle of the space (tiles 64, 3 stages); GROUP_SIZE_M enters as log2 / 4 (1 -> 0, 16 -> 1,
    64 -> 1.5), as the search embeds it."""
    c = _config_columns(configs)
    bd = breakdown
    t = bd.time_us
    log_bm, log_bn, log_bk = (np.log2(c[k]).astype(float) - 6.0 for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
    stages = c["num_stages"].astype(float) - 3.0
    warps8 = (c["num_warps"] == 8).astype(float)
    log_k_iters = np.log2(np.ceil(shape.k / c["BLOCK_SIZE_K"]))
    base = {
        # Share of the predicted time each term would take alone: where the model's time comes from.
        "compute_frac": bd.compute_us / t, "memory_frac": bd.memory_us / t, "latency_frac": bd.latency_us / t,
        "smem_frac": bd.smem_us / t, "l2_frac": bd.l2_us / t, "launch_frac": bd.launch_us / t,
        "indirection_frac": bd.indirection_us / t, "empty_frac": bd.empty_us / t,
        **occupancy_features(bd),
        "pad_eff": bd.padding_efficiency, "row_eff": bd.row_efficiency,
        # Programs past the padded rows, as a share of the grid.
        "empty_share": bd.empty_programs / bd.programs,
        "log_weight_passes": np.log2(np.maximum(bd.weight_passes, 1.0)),
        "wgmma": bd.uses_wgmma.astype(float), "warps8": warps8, "stages": stages, "stages_sq": stages ** 2,
        "log_bm": log_bm, "log_bn": log_bn, "log_bk": log_bk, "log_bm_sq": log_bm ** 2, "log_bn_sq": log_bn ** 2,
        "log_bk_sq": log_bk ** 2, "bm_x_bn": log_bm * log_bn,
        "group": np.log2(c["GROUP_SIZE_M"]).astype(float) / 4.0,
        # Few K iterations leave deep pipelines nothing to overlap.
        "log_k_iters": log_k_iters, "stages_x_k_iters": stages * np.minimum(log_k_iters, 4.0),
        "regs": bd.regs_per_thread / 255.0, "warps8_x_tile": warps8 * (log_bm + log_bn),
    }
    values = {"tokens": np.log2(shape.tokens), "rows_per_expert": np.log2(shape.rows / shape.experts),
              "n": np.log2(shape.n), "k": np.log2(shape.k)}
    scales = {f"log_{axis}": (values[axis] - centre) / scale for axis, (centre, scale) in _MOE_AXES.items()}
    scales["down"] = float(shape.gemm == "down")
    return _with_regimes(base, _MOE_REGIME_FEATURES, scales)


class ResidualError(ValueError):
    """A residual file that cannot be used."""


@dataclass(frozen=True)
class FeatureSet:
    """A kernel's residual features: `compute(shape, configs, breakdown)` -> (names, X), and the
    version a residual records (a residual fitted on another version is refused)."""

    version: str
    compute: Callable[..., tuple[tuple[str, ...], np.ndarray]]


GEMM_FEATURES = FeatureSet(GEMM_FEATURES_VERSION, gemm_features)
ATTENTION_FEATURES = FeatureSet(ATTENTION_FEATURES_VERSION, attention_features)
# The MoE residual is fitted on the training models (datasets/h200/moe/train), cross-validated by layer.
MOE_FEATURES = FeatureSet(MOE_FEATURES_VERSION, moe_features)
# FP8 fused MoE: the MoE features over its breakdown (MoeFp8Breakdown holds every MoE term), a residual of its own.
MOE_FP8_FEATURES = FeatureSet(MOE_FP8_FEATURES_VERSION, moe_features)


def feature_set(kernel: str) -> FeatureSet:
    """The residual features of the registered kernel family `kernel` (its registry entry's `features`)."""
    if kernel not in KERNELS:
        raise ResidualError(f"no residual features for kernel {kernel!r}; expected one of {', '.join(KERNELS)}")
    return load_implementation(KERNELS[kernel].features)


@dataclass(frozen=True)
class Residual:
    """A fitted correction for one kernel on one GPU: coefficients by feature name, plus what it was
    fitted on and how (fit data, cross-validated scores, the strategy constants chosen with it)."""

    kernel: str
    profile: str                  # HardwareProfile.name it was fitted for
    features_version: str
    coefficients: dict[str, float]
    strategy: dict[str, float] = field(default_factory=dict)   # the search's constants (tuner/search/gp.py)
    fit: dict = field(default_factory=dict)                    # data, settings, cross-validated scores
    pick: dict[str, float] = field(default_factory=dict)       # the zero-trial pick's change to coefficients
    neighbours: NeighbourTable | None = None                   # the neighbour vote (roofline/neighbours.py)

    @property
    def tritons(self) -> tuple[str, ...]:
        """The Triton releases (major.minor) this residual ranks for: the one its training data were
        measured under, then any that `rooftune fit --check` found it still ranks well under. Empty for a
        residual that records none (fitted before versions were recorded): then no version is refused."""
        return tuple(self.fit.get("triton", ()))

    def mismatch(self, space_version: str | None, triton: str | None = None) -> str | None:
        """Why this residual does not apply to measurements of `space_version` under Triton `triton`
        (None: any version), or None where it does. Data of another kernel or space (the H200 probe,
        AutoHeuristic logs) get the model alone; so does a Triton release it was neither fitted nor
        checked under (a new compiler can move the configs' order)."""
        if space_version is None or self.fit.get("space_version") != space_version:
            return (f"fitted on rooftune's kernel over {self.fit.get('space_version')}; these measurements are "
                    f"{space_version or 'of another kernel'}")
        if triton is not None and self.tritons and triton_release(triton) not in self.tritons:
            return (f"fitted under Triton {', '.join(self.tritons)}, not checked under {triton_release(triton)} "
                    f"(`rooftune fit {self.kernel} --check` on a training sweep made under it)")
        return None

    def applies_to(self, space_version: str | None, triton: str | None = None) -> bool:
        return self.mismatch(space_version, triton) is None

    def corrections(self, shape, configs, breakdown, profile: HardwareProfile | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Additive corrections to log(predicted time) per config, from one pass over the features: the
        search's, and the zero-trial pick's (the search's plus `pick`; the search's where it has none). With a
        neighbour table, each adds its weight times the vote (`vote`: needs `profile` and `configs` as a list)."""
        names, x = feature_set(self.kernel).compute(shape, configs, breakdown)
        search = x @ np.array([self.coefficients.get(n, 0.0) for n in names])
        pick = search
        if self.pick:
            coefficients = pick_coefficients(self.coefficients, self.pick)
            pick = x @ np.array([coefficients.get(n, 0.0) for n in names])
        if self.neighbours is None:
            return search, pick
        vote, settings = self.vote(shape, configs, profile), self.neighbours.settings
        return search + settings.w_search * vote, pick + settings.w_pick * vote

    def correction(self, shape, configs, breakdown, for_pick: bool = False,
                   profile: HardwareProfile | None = None) -> np.ndarray:
        """The search's correction, or `for_pick` the zero-trial pick's (`corrections`)."""
        return self.corrections(shape, configs, breakdown, profile)[1 if for_pick else 0]

    def prior_on(self, shape, columns: dict, profile: HardwareProfile) -> tuple[np.ndarray, np.ndarray]:
        """log(model µs) + the search's correction (no vote) of the configs `columns` on `shape`, and which can
        launch: the corrected model a neighbour's miss is measured against."""
        breakdown = predict(shape, columns, profile)
        names, x = feature_set(self.kernel).compute(shape, columns, breakdown)
        corrected = np.log(breakdown.time_us) + x @ np.array([self.coefficients.get(n, 0.0) for n in names])
        return corrected, np.asarray(breakdown.fits, dtype=bool)

    def vote(self, shape, configs, profile: HardwareProfile | None) -> np.ndarray:
        """The neighbour vote on each of `configs` (a list) of `shape` (zeros without a table)."""
        if self.neighbours is None:
            return np.zeros(len(configs) if isinstance(configs, list) else len(next(iter(configs.values()))))
        if profile is None or not isinstance(configs, list):
            raise ValueError("the neighbour vote needs the profile and the configs as a list")
        return self.neighbours.vote(shape, configs, profile, self.prior_on)

    def without_vote(self) -> Residual:
        """This residual without its neighbour vote (what another GPU checks and ranks with)."""
        return replace(self, neighbours=None, fit={**self.fit, "vote": None})

    def without_neighbour(self, shape) -> Residual:
        """This residual with `shape` left out of its vote, as a shape it was not fitted on would see it."""
        return self if self.neighbours is None else replace(self, neighbours=self.neighbours.without(shape))

    def contributions(self, shape, configs, breakdown, top: int = 5) -> list[list[tuple[str, float]]]:
        """Per config, the `top` largest terms of the correction (feature, coefficient · value), for `explain`."""
        names, x = feature_set(self.kernel).compute(shape, configs, breakdown)
        coef = np.array([self.coefficients.get(n, 0.0) for n in names])
        terms = x * coef
        order = np.argsort(-np.abs(terms), axis=1)[:, :top]
        return [[(names[j], float(terms[i, j])) for j in row] for i, row in enumerate(order)]


def pick_coefficients(coefficients: dict[str, float], pick: dict[str, float]) -> dict[str, float]:
    """The zero-trial pick's coefficients: the search's plus the pick's change."""
    return {n: coefficients.get(n, 0.0) + pick.get(n, 0.0) for n in {**coefficients, **pick}}


def ranking_digest(residual: Residual) -> str:
    """Digest of the coefficients a neighbour table's misses were measured against (its features, coefficients,
    pick change): a table fitted beside another residual is refused."""
    ranking = {"features_version": residual.features_version, "coefficients": residual.coefficients,
               "pick": residual.pick}
    return hashlib.sha256(json.dumps(ranking, sort_keys=True).encode()).hexdigest()[:12]


def residual_to_dict(residual: Residual) -> dict:
    return {"format": RESIDUAL_FORMAT, "kernel": residual.kernel, "profile": residual.profile,
            "features_version": residual.features_version, "coefficients": residual.coefficients,
            "pick": residual.pick, "strategy": residual.strategy, "fit": residual.fit}


# The search's constants a residual carries (tuner/search/gp.py SearchSettings): counts of configs, or figures
# that must be > 0 (kappa may be 0: the mean alone).
_STRATEGY_COUNTS = ("first_round", "round_size")
_STRATEGY_POSITIVE = ("prior_sd", "length_scale", "offset_sd", "noise_sd")
# The largest |coefficient| (and pick change) a residual may hold: a correction of log time per unit of a
# feature (features are of order 1), so 100 already scales a time by e^100. The shipped ones stay under 75.
COEFFICIENT_LIMIT = 100.0


@functools.cache
def feature_names(kernel: str) -> tuple[str, ...]:
    """The names of `kernel`'s features, in order: exactly the coefficients a residual of it holds."""
    spec = KERNELS[kernel]
    shape = spec.parse(spec.example)  # any shape: a feature's name depends on none, nor on the profile
    for name in list_profiles():  # the first profile that models the kernel (an A100 has no FP8 rate)
        profile = load_profile(name)
        configs = list(legal_configs(spec.space, shape, profile).configs[:1])
        try:
            with np.errstate(all="ignore"):
                breakdown = load_implementation(spec.model).predict(shape, configs_to_columns(configs), profile)
        except ProfileError:
            continue
        return feature_set(kernel).compute(shape, configs, breakdown)[0]
    raise ProfileError(f"no shipped profile models {kernel}")


def _numbers(data: dict, key: str, origin: str) -> dict[str, float]:
    """`data[key]` (absent: empty) as {name: finite number}; ResidualError naming the first value that is not."""
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ResidualError(f"{origin}: {key!r} must be an object of name: number, got {type(value).__name__}")
    for name, number in value.items():
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            raise ResidualError(f"{origin}: {key} {name} = {number!r} is not a finite number; a damaged residual: "
                                f"refit it (`rooftune fit`)")
    values = {str(k): float(v) for k, v in value.items()}
    if key != "strategy":
        for name, number in values.items():
            if abs(number) > COEFFICIENT_LIMIT:
                raise ResidualError(f"{origin}: {key} {name} = {number:g} is past ±{COEFFICIENT_LIMIT:g} (a "
                                    f"correction of log time per unit of a feature); a damaged residual: refit it")
    return values


def _check_values(kernel: str, coefficients: dict, pick: dict, strategy: dict, origin: str) -> None:
    """ResidualError where the coefficients are not exactly `kernel`'s features (a missing one would silently
    count as 0, an unknown one never counts), or a search constant is out of its range."""
    names = set(feature_names(kernel))
    missing, unknown = sorted(names - set(coefficients)), sorted((set(coefficients) | set(pick)) - names)
    if missing or unknown:
        what = "; ".join(part for part in (f"missing {len(missing)} ({', '.join(missing[:5])})" if missing else "",
                                           f"unknown {', '.join(unknown[:5])}" if unknown else "") if part)
        raise ResidualError(f"{origin}: its coefficients are not the {len(names)} features of {kernel} "
                            f"({feature_set(kernel).version}): {what}; refit it (`rooftune fit {kernel}`)")
    for key, value in strategy.items():
        bad = ((key in _STRATEGY_COUNTS and (value < 1 or value != int(value)))
               or (key in _STRATEGY_POSITIVE and value <= 0) or (key == "kappa" and value < 0))
        if bad:
            rule = "a whole number >= 1" if key in _STRATEGY_COUNTS else ">= 0" if key == "kappa" else "> 0"
            raise ResidualError(f"{origin}: strategy {key} = {value:g} must be {rule}")


def residual_from_dict(data: dict, origin: str) -> Residual:
    """A residual from its JSON, validated: the format, a kernel rooftune fits, its features' version, finite
    coefficients for exactly the kernel's features, finite search constants in range."""
    if not isinstance(data, dict) or data.get("format") != RESIDUAL_FORMAT:
        raise ResidualError(f"{origin}: not a rooftune residual (expected format {RESIDUAL_FORMAT!r})")
    kernel = str(data.get("kernel"))
    if kernel not in KERNELS:
        raise ResidualError(f"{origin}: a residual for kernel {kernel!r}; rooftune fits {', '.join(KERNELS)}")
    expected = feature_set(kernel).version
    if data.get("features_version") != expected:
        raise ResidualError(f"{origin}: fitted on features {data.get('features_version')!r}, this rooftune "
                            f"computes {expected!r}; refit with `rooftune fit {kernel}`")
    if "coefficients" not in data or not isinstance(data.get("fit", {}), dict) or "profile" not in data:
        raise ResidualError(f"{origin}: malformed residual (needs 'coefficients', 'profile' and a 'fit' object)")
    coefficients = _numbers(data, "coefficients", origin)
    # A residual written before the pick had its own change picks by the search's coefficients.
    pick, strategy = _numbers(data, "pick", origin), _numbers(data, "strategy", origin)
    _check_values(kernel, coefficients, pick, strategy, origin)
    return Residual(kernel, str(data["profile"]), data["features_version"], coefficients, strategy,
                    dict(data.get("fit", {})), pick)


def residual_file_name(kernel: str, profile: HardwareProfile) -> str:
    """'gemm-NVIDIA_H200.json': one file per kernel and GPU (the profile's name, spaces as '_')."""
    return f"{kernel}-{profile.name.replace(' ', '_')}.json"


def read_residual(path: str | os.PathLike) -> Residual:
    """The residual at `path`, with the neighbour table beside it where there is one (`with_neighbours`)."""
    data = read_json(path, ResidualError, "no such residual file")
    return with_neighbours(residual_from_dict(data, str(path)), Path(path))


def with_neighbours(residual: Residual, path: Path) -> Residual:
    """`residual` (read from `path`) with its neighbour table, where its fit record says it has one (`fit.vote`):
    the file beside it (roofline/neighbours.py `neighbours_file`); a table there beside a residual without a vote
    (an older fit's) is not read. ResidualError where the table is missing or cannot be used: damaged, of another
    kernel or GPU, or fitted beside another residual (its misses were measured against other coefficients)."""
    if not residual.fit.get("vote"):
        return residual
    table_path = neighbours_file(path)
    if not check_input(table_path).is_file():
        raise ResidualError(f"{path}: fitted with a neighbour vote, but its table {table_path} is missing; copy it "
                            f"beside the residual, or refit (`rooftune fit {residual.kernel}`)")
    try:
        table = read_table(table_path)
    except NeighbourError as exc:
        raise ResidualError(f"{exc}; refit it (`rooftune fit {residual.kernel}`)") from None
    if (table.kernel, table.profile) != (residual.kernel, residual.profile):
        raise ResidualError(f"{table_path}: a neighbour table of {table.kernel} on {table.profile}, beside a residual "
                            f"of {residual.kernel} on {residual.profile}")
    if table.residual != ranking_digest(residual):
        raise ResidualError(f"{table_path}: fitted beside another residual than {path} (its digest "
                            f"{table.residual}, this one's {ranking_digest(residual)}); refit both together "
                            f"(`rooftune fit {residual.kernel}`)")
    if residual.fit["vote"] != asdict(table.settings):
        raise ResidualError(f"{table_path}: its vote settings {asdict(table.settings)} are not the ones {path} "
                            f"records ({residual.fit['vote']}); refit both together (`rooftune fit {residual.kernel}`)")
    return replace(residual, neighbours=table)


def write_residual(residual: Residual, path: str | os.PathLike) -> None:
    """Write whole or not at all (rooftune/outputs.py: OutputError naming the path where it cannot be), and its
    neighbour table beside it where it has one."""
    if residual.neighbours is not None:
        write_table(residual.neighbours, neighbours_file(path))
    write_atomic(path, json.dumps(residual_to_dict(residual), indent=1, sort_keys=False) + "\n")
