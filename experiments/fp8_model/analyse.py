"""Where the FP8 fused-MoE model's pick loses on the training data (never the held-out)."""
import sys
import numpy as np
from rooftune.eval.datasets.format import read_dataset
from rooftune.hwprofiles.profile import load_profile
from rooftune.tuner.fitting import fit_shapes_from_records
from rooftune.roofline.fit import prepare

data = sys.argv[1] if len(sys.argv) > 1 else "datasets/h200/moe_fp8/train"
profile = load_profile("h200")
shapes = fit_shapes_from_records(read_dataset(data))
prep = prepare(shapes, profile)
rows = []
for d in prep:
    t = d.source.time_us.copy(); t[~d.fits] = np.nan
    p = d.log_predicted.copy(); p[~d.fits | ~np.isfinite(t)] = np.inf
    i, b = int(np.argmin(p)), int(np.nanargmin(t))
    ok = np.isfinite(t) & np.isfinite(p)
    from scipy.stats import spearmanr
    rho = spearmanr(p[ok], t[ok]).correlation
    s = d.source.shape
    rows.append((t[b] / t[i], s, d.source.configs[i], d.source.configs[b], np.exp(p[i]), t[i], np.exp(p[b]), t[b], rho))
rows.sort(key=lambda r: r[0])
print("score mean", np.mean([r[0] for r in rows]))
for r in rows[:40]:
    s = r[1]
    print(f"{r[0]:.3f} rho {r[8]:.2f} E{s.experts} H{s.hidden} I{s.intermediate} M{s.tokens} {s.gemm} {s.quant}")
    print("   pick", dict(r[2]), f"pred {r[4]:.1f} meas {r[5]:.1f}")
    print("   best", dict(r[3]), f"pred {r[6]:.1f} meas {r[7]:.1f}")
