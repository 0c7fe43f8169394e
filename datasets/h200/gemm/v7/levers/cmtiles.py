"""Composite-height tiles (cmexp.py: BLOCK_M + BLOCK_M2 rows, e.g. 192x256) timed on training shapes beside their
space-7 best configs and cuBLAS, to decide whether a later space holds them: v6/levers/cntiles.py's method and
machinery (imported, not copied), with the tiles' roles swapped. Per shape (datasets/h200/gemm/v7/train,
training shapes only): the 6 fastest space-7 configs ("base") and the composite-height tiles that best fill the
SMs' waves ("cm"), each with the warps and stages that fit; every launcher reference-checked, then all timed in
one interleaved pass with cuBLAS. Resumable (DONE: a previous call's cmtiles.json).

usage (repository root, on the GPU machine):
  python3 datasets/h200/gemm/v7/levers/cmtiles.py OUT SECONDS DONE SHAPE...   (SHAPE: MxNxK-layout)
  python3 datasets/h200/gemm/v7/levers/cmtiles.py --plan SHAPE...            (the variants, no GPU)
  python3 datasets/h200/gemm/v7/levers/cmtiles.py --summary cmtiles.json     (the figures)
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "v6" / "levers"))
import cntiles as ct  # noqa: E402
import lever_summary  # noqa: E402

ct.TRAIN = HERE.parent / "train"


def composite_rows(m, n):
    out = []
    for bm in (64, 128, 256):
        for bm2 in (32, 64):
            rows = bm + bm2
            if bm2 >= bm or rows > ct.next_pow2(m) or rows & (rows - 1) == 0:
                continue
            for bn in (64, 128, 256):
                if bn > max(64, ct.next_pow2(n)):
                    continue
                s, tiles = ct.score(m, n, rows, bn)
                out.append((s, bm, bm2, bn, tiles))
    out.sort(reverse=True)
    return out[:ct.TILES_PER_SHAPE]


def variants(text):
    """[(kind, config)]: kind base (a space-7 config) or cm (BLOCK_M2 in the config)."""
    m, n, k, layout = ct.parse(text)
    out = [("base", c) for c in ct.sweep_configs(text)[:6]]
    for _, bm, bm2, bn, tiles in composite_rows(m, n):
        for warps in (4, 8):
            if (bm + bm2) * bn / (32 * warps) > ct.MAX_ACC_PER_THREAD:
                continue
            for stages in (3, 4, 5):
                if stages * (bm + bm2 + bn) * 64 * 2 > ct.SMEM_LIMIT:
                    continue
                out.append(("cm", dict(BLOCK_M=bm, BLOCK_M2=bm2, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8,
                                       num_warps=warps, num_stages=stages)))
    return out


def build(text, v, inputs, out):
    import cmexp
    from rooftune.kernels import gemm
    kind, c = v
    if kind == "base":
        return gemm.make_launcher(c, ct.parse(text)[3], inputs, out)
    return cmexp.cm_launcher(c, ct.parse(text)[3], inputs, out)


def summary(results):
    lever_summary.summary(results, ct.best_of, "cm", "composite")


# The worker processes import this module, so cntiles's functions find these there too.
ct.variants, ct.build, ct.summary = variants, build, summary
ct.summary_line = lambda r: summary([r]) or ""


def main(out_dir, seconds, done_path, shapes):
    """cntiles's loop; its results file is renamed cmtiles.json, the name run.sh resumes from."""
    ct.main(out_dir, seconds, done_path, shapes)
    if (out_dir / "cntiles.json").exists():
        (out_dir / "cntiles.json").replace(out_dir / "cmtiles.json")


_cntiles_compile_job = ct.compile_job


def compile_job(job):
    """A worker's compile: cntiles's, run where this module is imported, so its `build` is this one's."""
    return _cntiles_compile_job(job)


ct.compile_job = compile_job  # what cntiles.main hands its worker pool


if __name__ == "__main__":
    if sys.argv[1] == "--plan":
        for s in sys.argv[2:]:
            vs = variants(s)
            print(s, len(vs), sorted({f"{c['BLOCK_M']}+{c['BLOCK_M2']}x{c['BLOCK_N']}" for k, c in vs if k == "cm"}))
    elif sys.argv[1] == "--summary":
        summary(json.loads(Path(sys.argv[2]).read_text()))
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:])
