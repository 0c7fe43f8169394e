"""The SK-first stream-K experiment (datasets/h200/gemm/v7/skfirst/): its schedule against a reference on odd
shapes and program counts, and its probe shapes' rule. The schedule runs as two launches, phases 1-2 then the
fix-up, because Triton's interpreter runs programs one after another (on a GPU the same split is exact too)."""

import json
import sys
from pathlib import Path

import pytest
import torch
import triton

REPO = Path(__file__).resolve().parents[2]
SKFIRST = REPO / "datasets" / "h200" / "gemm" / "v7" / "skfirst"
sys.path.insert(0, str(SKFIRST))

import probe  # noqa: E402
import skf  # noqa: E402
from rooftune.kernels import gemm_v2  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

# (m, n, k, BLOCK_M, BLOCK_N, BLOCK_K, programs): partial tiles with 2-3 contributors; runs spanning three
# tiles (a whole tile in the middle); more programs than stream-K iterations (empty runs)
CASES = [(200, 160, 256, 64, 64, 32, 5), (300, 100, 520, 64, 32, 32, 9), (64, 64, 96, 64, 64, 32, 5),
         (130, 72, 104, 64, 32, 32, 7)]


def run_skf(a, b, bm, bn, bk, programs, sk_wave, fix, counts, ws):
    m, k = a.shape
    n = b.shape[0]
    out = torch.full((m, n), float("nan"), dtype=a.dtype, device=a.device)
    a_desc, b_desc = gemm_v2._descriptors(a, b, "nk", (m, n, k), dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk))
    for phases in (3, 4):
        skf.skf_kernel[(programs,)](a_desc, b_desc, out, ws, counts, m, n, k, out.stride(0), out.stride(1), 8,
                                    BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, B_NK=True, SK_WAVE=sk_wave, PHASES=phases,
                                    FIX=fix, CHUNK=16)
    return out


@pytest.mark.parametrize("fix", [0, 1])
@pytest.mark.parametrize("sk_wave", [0, 1])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:3])) + f"-p{c[6]}")
def test_sk_first_matches_reference_twice(case, sk_wave, fix):
    m, n, k, bm, bn, bk, programs = case
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(torch.float16).to(DEVICE)
    b = torch.randn(n, k, generator=gen).to(torch.float16).to(DEVICE)
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    counts = torch.zeros(2 * tiles, dtype=torch.int32, device=DEVICE)
    ws = torch.empty((2 * programs, bm, bn), dtype=torch.float32, device=DEVICE)
    ref = a.double() @ b.double().t()
    for launch in (1, 2):  # the counters must be back at zero for the second launch
        out = run_skf(a, b, bm, bn, bk, programs, sk_wave, fix, counts, ws)
        err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
        assert err <= 1e-3, f"launch {launch}: relative error {err}"  # NaN (a tile left unwritten) fails too
        assert int(counts.abs().sum()) == 0, f"launch {launch}: counters not reset"


def test_probe_shapes_follow_the_rule_and_skip_the_lists():
    shapes = probe.draw()
    assert shapes == probe.draw() and len(set(shapes)) == probe.COUNT
    listed = set()
    for name in ("shapes_train.json", "shapes_heldout.json"):
        listed |= {(s["m"], s["n"], s["k"]) for s in json.loads((REPO / "datasets/h200/gemm" / name).read_text())}
    for text in shapes:
        m, n, k = map(int, text.removesuffix("-nk").split("x"))
        assert probe.in_family(m, n, k) and (m, n, k) not in listed
    assert not probe.in_family(4096, 4096, 4096)   # 3.9 waves of 128x256
    assert not probe.in_family(3367, 1280, 2048)   # K too short
    assert probe.in_family(3367, 1280, 8192)       # 1.02 waves: 3 tiles in the second


def test_probe_configs_are_the_current_ranking():
    """probe_configs.json is what --prepare writes now: the same shapes, each config legal in space 7."""
    from rooftune.candidates import GEMM_SPACE, GemmShape, legal_configs
    from rooftune.hwprofiles import load_profile
    stored = json.loads((SKFIRST / "probe_configs.json").read_text())
    assert list(stored) == probe.draw()
    profile = load_profile("h200")
    for text, configs in stored.items():
        m, n, k = map(int, text.removesuffix("-nk").split("x"))
        legal = {json.dumps(dict(c), sort_keys=True) for c in
                 legal_configs(GEMM_SPACE, GemmShape(m, n, k, layout="nk", dtype="bf16"), profile).configs}
        assert len(configs) == probe.TOP and all(json.dumps(c, sort_keys=True) in legal for c in configs)


def test_family_shapes_leave_the_probe_shapes_out(monkeypatch):
    """The family set (PROBE_SET=family) is drawn with another seed and leaves the probe shapes out, so the probe
    shapes stay an independent check of what the family chooses; family_configs.json holds exactly its shapes."""
    probes = set(probe.draw())
    monkeypatch.setattr(probe, "PROBE_SET", "family")
    monkeypatch.setattr(probe, "SEED", 1)
    monkeypatch.setattr(probe, "COUNT", 16)
    family = probe.draw()
    assert len(set(family)) == 16 and not probes & set(family)
    assert list(json.loads((SKFIRST / "family_configs.json").read_text())) == family
