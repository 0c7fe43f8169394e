"""What a config will cost: the roofline + occupancy model, its breakdown, and the fitted residual."""

from __future__ import annotations

import numpy as np

from rooftune.candidates import Shape, kernel_of, load_implementation
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.attention import AttentionBreakdown, predict_attention
from rooftune.roofline.costmodel import CostModel
from rooftune.roofline.gemm import GemmBreakdown, predict_gemm
from rooftune.roofline.moe import MoeBreakdown, predict_moe


def cost_model(shape: Shape) -> CostModel:
    """The cost model of `shape`'s kernel family (its registry entry's `model`)."""
    return load_implementation(kernel_of(shape).model)


def predict(shape: Shape, columns: dict[str, np.ndarray], profile: HardwareProfile):
    """Cost breakdown of every config in `columns` (name -> int64 array) for `shape` on `profile`."""
    return cost_model(shape).predict(shape, columns, profile)


def rank(shape: Shape, columns: dict[str, np.ndarray], profile: HardwareProfile) -> np.ndarray:
    """Indices into `columns`, fastest predicted first (ties keep column order)."""
    return np.argsort(predict(shape, columns, profile).time_us, kind="stable")


__all__ = ["AttentionBreakdown", "CostModel", "GemmBreakdown", "MoeBreakdown", "cost_model", "predict",
           "predict_attention", "predict_gemm", "predict_moe", "rank"]
