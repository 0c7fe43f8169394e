"""What a config will cost: the roofline + occupancy model, its breakdown, and the fitted residual."""

from __future__ import annotations

import numpy as np

from rooftune.candidates import AttentionShape, GemmShape, MoeShape
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.attention import AttentionBreakdown, predict_attention
from rooftune.roofline.gemm import GemmBreakdown, predict_gemm
from rooftune.roofline.moe import MoeBreakdown, predict_moe


def predict(shape: GemmShape | AttentionShape | MoeShape, columns: dict[str, np.ndarray],
            profile: HardwareProfile) -> GemmBreakdown | AttentionBreakdown | MoeBreakdown:
    """Cost breakdown of every config in `columns` (name -> int64 array) for `shape` on `profile`."""
    if isinstance(shape, GemmShape):
        return predict_gemm(shape, columns, profile)
    if isinstance(shape, AttentionShape):
        return predict_attention(shape, columns, profile)
    if isinstance(shape, MoeShape):
        return predict_moe(shape, columns, profile)
    raise TypeError(f"no cost model for {type(shape).__name__}")


def rank(shape: GemmShape | AttentionShape | MoeShape, columns: dict[str, np.ndarray], profile: HardwareProfile) -> np.ndarray:
    """Indices into `columns`, fastest predicted first (ties keep column order)."""
    return np.argsort(predict(shape, columns, profile).time_us, kind="stable")


__all__ = ["AttentionBreakdown", "GemmBreakdown", "MoeBreakdown", "predict", "predict_attention", "predict_gemm",
           "predict_moe", "rank"]
