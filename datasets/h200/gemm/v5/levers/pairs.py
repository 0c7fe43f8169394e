"""levers.json read back (no GPU): per variant kind, each variant's time against the same config's space-5
kernel timed in the same pass (base, or for `fixup` the same split summed by the reduction kernel), and what
cuBLAS runs. usage (repository root): python3 datasets/h200/gemm/v5/levers/pairs.py [levers.json]
"""
import json
import sys
from pathlib import Path

from rooftune.eval.reports import geomean

PATH = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("levers.json"))


def main():
    results = json.loads(PATH.read_text())
    pairs = {}
    for r in results:
        t = r["times_us"]
        for key, us in t.items():
            if key == "cublas":
                continue
            kind, cfg = key.split(" ", 1)
            if kind in ("store1", "store2", "pstore1", "pstore2", "ctas2"):
                ref = t.get(f"base {cfg}")
            elif kind == "fixup" and "FIXUP=1" in cfg:
                ref = t.get(f"fixup {cfg.replace('FIXUP=1', 'FIXUP=0')}")
            else:
                continue
            if ref:
                pairs.setdefault(kind, []).append((r["shape"], ref / us))
    print("same config, same pass: space-5 kernel time ÷ variant time (> 1: the variant is faster)")
    for kind, rows in sorted(pairs.items()):
        vals = [v for _, v in rows]
        print(f"  {kind:8} {len(rows):3} pairs: geometric mean {geomean(vals):.3f}, min {min(vals):.3f}, max {max(vals):.3f}"
              f"; per shape best: " + ", ".join(f"{s} {v:.3f}" for s, v in sorted(
                  {s: max(v for s2, v in rows if s2 == s) for s, _ in rows}.items())))
    gain = []
    for r in results:
        t = r["times_us"]
        space6 = min(v for k, v in t.items() if k.startswith(("base ", "pstore2 ")))
        gain.append(space6 / min(space6, *(v for k, v in t.items() if k.startswith("store2 "))))
    print(f"\nthe one-tile-per-program store in halves as an option beside space 6's configs (base and pstore2): "
          f"best ÷ best with it, geometric mean {geomean(gain):.4f}, max {max(gain):.3f} over {len(gain)} shapes")
    print("\ncuBLAS ÷ the fastest of everything timed, and cuBLAS's kernels")
    for r in results:
        t = r["times_us"]
        best = min(v for k, v in t.items() if k != "cublas")
        print(f"  {r['shape']:>20} {t['cublas'] / best:.3f}  {'; '.join(r['cublas_kernels'])}")


if __name__ == "__main__":
    main()
