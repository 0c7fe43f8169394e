"""The AutoHeuristic logs' choosing half (argument 0) or scoring half (1) replayed with the model alone, its FMA-path
register counts as written, then as ptxas reports them (fma_regs.json beside this file). Run from the repository root."""

import json
import sys
import zlib
from pathlib import Path

import numpy as np

from rooftune.eval.datasets import readers
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.roofline import gemm
from rooftune.tuner.evaluation import replay
from rooftune.tuner.search.strategies import rooftune_strategy

R = json.load(open(Path(__file__).resolve().parent / 'fma_regs.json'))
table = {(r[0], r[1], r[2], r[3], r[4], r[5]): r[6] + r[7] / 4 for r in R}
orig = gemm.gemm_residency
CAP = {}

def patched(shape, columns, t, profile):
    res = orig(shape, columns, t, profile)
    if shape.dtype != "fp32" or not USE:
        return res
    cap = profile.compute_capability[0] * 10 + profile.compute_capability[1]
    need = np.array([table.get((cap, int(a), int(b), int(c), int(d), int(e)), np.nan)
                     for a, b, c, d, e in zip(t.bm, t.bn, t.bk, t.warps, t.stages)])
    regs = np.where(np.isnan(need), res.regs, need).astype(np.int64)
    resident, limiter = gemm.ctas_per_sm(res.smem_cta, np.minimum(regs, profile.regs_per_thread_max), t.warps, profile)
    full_waves, last_per_sm, last_active, waves, wave_eff = gemm.wave_split(t.ctas, resident, profile.sm_count)
    import dataclasses
    return dataclasses.replace(res, regs=regs, resident=resident, limiter=limiter,
        occupancy=resident * t.warps * 32 / profile.max_threads_per_sm, full_waves=full_waves, last_per_sm=last_per_sm,
        last_active=last_active, waves=waves, wave_eff=wave_eff, concurrent=np.minimum(t.tiles, profile.sm_count * resident))

gemm.gemm_residency = patched
def half(r): return zlib.crc32(str(r.shape).encode()) % 2
H = int(sys.argv[1]) if len(sys.argv) > 1 else 0
for log, gpu in (("h100", "h100_sxm"), ("a100", "a100_sxm4_80gb")):
    prof = load_profile(gpu)
    recs = [r for r in readers.load_records(Path("../shared/datasets/autoheuristic") / f"{log}_mm.txt.gz", kernel="gemm") if r.best_candidate_us and half(r) == H]
    for USE in (False, True):
        cells = []
        for b in (1, 5):
            sc = [s.score for s in replay(recs, rooftune_strategy(None), b, prof)]
            f32 = [s.score for s in replay([r for r in recs if r.shape.dtype == "fp32"], rooftune_strategy(None), b, prof)]
            cells.append(f"{b}: {np.mean(sc):.3f} / {summarize(sc)['worst_decile_mean']:.3f} (fp32 {np.mean(f32):.3f})")
        print(log, "half", H, "oracle regs" if USE else "model regs", "; ".join(cells), flush=True)
