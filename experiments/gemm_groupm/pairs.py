"""GROUP_M 8 against GROUP_M 1 of otherwise identical configs on the GEMM training data (never the held-out): the
measured log ratio, the model's and the corrected (cross-validated, shipped setting) one, per shape over its
near-best pairs, beside the quantities a tile-order term would use.

    PYTHONPATH=$PWD python3 experiments/gemm_groupm/pairs.py [--near 1.15] [--fold-seed S]

A pair counts where its faster member is within `--near` of the shape's best. Per shape: pairs, the median measured
log(t8 / t1), the median corrected one, the model's, and (of the shape's best GROUP_M-free tile) tiles_m, tiles_n,
CTAs in flight, and ws_l2: the operand bytes a wave's CTAs touch under GROUP_M 1 (rows_live A stripes of K and
cols_live B stripes) over the L2 size.
"""
import argparse
import sys

import numpy as np

from rooftune.candidates.shapes import DTYPE_BYTES
from rooftune.eval.datasets.readers import load_records
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings
from rooftune.tuner import fitting
from rooftune.tuner.fitting import fit_shapes_from_records, fold_fits, prepare, prior_log_us

DATA = "datasets/h200/gemm/train"
KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_N2", "BLOCK_K", "SPLIT_K", "TMA", "PERSISTENT", "FIXUP")


def twin_key(c) -> tuple:
    p = dict(c.kernel_params())
    return tuple(p[k] for k in KEYS) + (c.num_warps, c.num_stages)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--near", type=float, default=1.15)
    ap.add_argument("--fold-seed", type=int, default=fitting.FOLD_SEED)
    args = ap.parse_args()
    if "heldout" in args.data:
        sys.exit("training data only")
    fitting.FOLD_SEED = args.fold_seed
    profile = load_profile("h200")
    data = prepare(fit_shapes_from_records(load_records(args.data)), profile)
    coefficients = {}
    for test, fitted in fold_fits(data, RidgeSettings(1.0, 5.0), None):
        for i in test:
            coefficients[i] = fitted.coefficients
    rows = []
    for i, d in enumerate(data):
        s = d.source.shape
        t = np.where(d.fits, d.source.time_us, np.nan)
        best = np.nanmin(t)
        corr = prior_log_us(d, coefficients[i])
        index = {}
        for j, c in enumerate(d.source.configs):
            index.setdefault(twin_key(c), {})[c["GROUP_M"]] = j
        meas, cor, mod, keys = [], [], [], []
        for key, g in index.items():
            if 1 not in g or 8 not in g:
                continue
            a, b = g[1], g[8]
            if not (np.isfinite(t[a]) and np.isfinite(t[b])) or min(t[a], t[b]) > args.near * best:
                continue
            meas.append(np.log(t[b] / t[a]))
            cor.append(corr[b] - corr[a])
            mod.append(d.log_predicted[b] - d.log_predicted[a])
            keys.append(key)
        b = int(np.nanargmin(t))
        bd = d.breakdown
        cb = d.source.configs[b]
        p = dict(cb.kernel_params())
        bm, bn = p["BLOCK_M"], p["BLOCK_N"] + p["BLOCK_N2"]
        tm, tn = -(-s.m // bm), -(-s.n // bn)
        conc = min(tm * tn, profile.sm_count * int(bd.ctas_per_sm[b]))
        rows_live = min(tm, -(-conc // tn))
        cols_live = min(tn, conc)
        elem = DTYPE_BYTES[s.dtype]
        ws = (rows_live * bm + cols_live * bn) * s.k * elem / profile.l2_bytes
        rows.append((s, len(meas), np.median(meas) if meas else np.nan, np.median(cor) if cor else np.nan,
                     np.median(mod) if mod else np.nan, tm, tn, conc, ws, cb["GROUP_M"],
                     float(np.max(np.abs(meas))) if meas else np.nan))
    rows.sort(key=lambda r: -abs(r[2]) if np.isfinite(r[2]) else 0)
    print("shape                      pairs  meas(8/1)  corr   model  tiles_m tiles_n conc  ws/L2  best_g  max|meas|")
    for s, n, me, co, mo, tm, tn, conc, ws, g, mx in rows:
        print(f"{s.m:>6}x{s.n:<6}x{s.k:<6} {s.layout} {n:4d}  {me:+.3f}  {co:+.3f}  {mo:+.3f}  {tm:6d} {tn:6d} {conc:5d} "
              f"{ws:6.2f}  {g}  {mx:.3f}")
    m = np.array([r[2] for r in rows])
    c = np.array([r[3] for r in rows])
    ok = np.isfinite(m)
    print(f"\nshapes with pairs {ok.sum()}; median |meas| {np.median(np.abs(m[ok])):.3f}; "
          f"corr(meas, corrected) {np.corrcoef(m[ok], c[ok])[0, 1]:.2f}; "
          f"mean |meas - corrected| {np.mean(np.abs(m[ok] - c[ok])):.3f}")


if __name__ == "__main__":
    main()
