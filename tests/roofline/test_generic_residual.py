"""The generic residual: its features over the generic breakdown, its correction, its JSON and where it ships."""

import json

import numpy as np
import pytest

from rooftune.candidates.kernel_counts import CompiledFacts, KernelCounts, TensorTraffic
from rooftune.hwprofiles import load_profile
from rooftune.roofline import generic_residual as gr
from rooftune.roofline.generic import predict_generic
from rooftune.roofline.residual import ResidualError

H100 = load_profile("h100_sxm")


def _counts(warps: int, stages: int) -> KernelCounts:
    return KernelCounts(256, CompiledFacts(warps, stages, 40, 0), tensors=(TensorTraffic("x", 1 << 20, 2.0 ** 20, 0),))


def test_features_are_named_finite_and_one_row_per_config():
    counts = [_counts(w, s) for w in (1, 4, 8) for s in (1, 3)]
    bd = predict_generic(counts, H100)
    names, x = gr.generic_features(bd, counts)
    assert names == gr.FEATURE_NAMES and x.shape == (6, len(names)) and np.all(np.isfinite(x))
    assert x[:, names.index("log_warps")].tolist() == [-2, -2, 0, 0, 1, 1]
    assert x[:, names.index("stages")].tolist() == [-2, 0] * 3


def test_the_correction_is_the_features_dotted_with_the_coefficients():
    counts = [_counts(4, 3), _counts(8, 3)]
    bd = predict_generic(counts, H100)
    residual = gr.GenericResidual("p", {**dict.fromkeys(gr.FEATURE_NAMES, 0.0), "log_warps": 0.5})
    assert residual.correction(bd, counts).tolist() == pytest.approx([0.0, 0.5])
    assert residual.contributions(bd, counts, top=1)[1] == [("log_warps", 0.5)]


def test_the_json_round_trips_and_a_damaged_one_is_refused(tmp_path):
    residual = gr.GenericResidual(H100.name, dict.fromkeys(gr.FEATURE_NAMES, 0.25), {"kernels": ["a", "b"]})
    path = tmp_path / "generic.json"
    gr.write_generic_residual(residual, path)
    assert gr.read_generic_residual(path) == residual
    data = json.loads(path.read_text())
    for damage, words in [({"features_version": "generic-features-0"}, "refit it"),
                          ({"coefficients": {"occupancy": 1.0}}, "not the 22 generic features"),
                          ({"coefficients": {**data["coefficients"], "regs": float("nan")}}, "not a finite number"),
                          ({"format": "x"}, "not a rooftune generic residual")]:
        path.write_text(json.dumps({**data, **damage}))
        with pytest.raises(ResidualError, match=words):
            gr.read_generic_residual(path)


def test_the_shipped_one_is_found_by_the_triton_release(tmp_path, monkeypatch):
    monkeypatch.setattr(gr, "residuals_root", lambda: tmp_path)
    monkeypatch.setattr(gr, "release_folder", lambda release: tmp_path / f"triton-{release}")
    assert gr.shipped_generic_residual(H100, "3.6.0") is None
    residual = gr.GenericResidual(H100.name, dict.fromkeys(gr.FEATURE_NAMES, 0.1))
    (tmp_path / "triton-3.6").mkdir()
    gr.write_generic_residual(residual, gr.shipped_generic_path(H100, "3.6"))
    assert gr.shipped_generic_residual(H100, "3.6.0") == residual
    assert gr.shipped_generic_residual(H100, "3.9.0") is None and gr.shipped_generic_residual(H100, None) == residual
