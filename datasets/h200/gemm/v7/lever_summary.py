"""The per-shape and overall figures of a lever timed by v6/levers/cntiles.py's machinery (cmtiles.py, sktiles.py):
the space's best ("base"), the lever's best (its `kind`) and cuBLAS, from a results list of cntiles's form."""

import math


def summary(results, best_of, kind: str, label: str) -> None:
    gains, before, after = [], [], []
    for r in results:
        fam = best_of(r)
        cb, base = fam["cublas"][0], fam["base"][0]
        lever = fam.get(kind, (float("inf"), "-"))
        print(f"{r['shape']:>20} cuBLAS {cb:8.2f}  base {base:8.2f}  {label} {lever[0]:8.2f}  base÷{label} "
              f"{base / lever[0]:.3f}  cuBLAS÷base {cb / base:.3f} -> cuBLAS÷best {cb / min(base, lever[0]):.3f}  "
              f"errors {len(r['errors'])}  {lever[1][:90]}")
        gains.append(base / lever[0])
        before.append(cb / base)
        after.append(cb / min(base, lever[0]))
    if len(results) > 1:
        g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
        print(f"{len(results)} shapes: base÷{label} geomean {g(gains):.3f} (min {min(gains):.3f}, max "
              f"{max(gains):.3f}, {label} fastest on {sum(x > 1 for x in gains)}); cuBLAS÷best {g(before):.3f} "
              f"-> {g(after):.3f}")
