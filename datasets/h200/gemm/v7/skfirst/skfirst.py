"""Stream-K "SK first, fix-up last" (skf.py) against space 7, on the training shapes where the space trails
cuBLAS with one to a few waves of large tiles: each shape's 6 fastest space-7 configs, skf.py's schedule
(SK_WAVE 0 and 1; the fix-up by each partial tile's first contributor or shared by all its contributors, FIX 0
and 1) on five tiles, and v2/streamk/skexp.py's schedule (data-parallel first, fix-up by the last
contributor; SK_WAVE 0) on the same tiles as the control, all timed with cuBLAS in one interleaved pass. The
machinery is v6/levers/cntiles.py's, as for streamk/sktiles.py: every launcher passes kernels/check.py's bound
against an fp64 reference before it is timed; compiles run first, in worker processes; resumable (DONE: a
previous call's skfirst.json). B as [N, K] only. The shapes are streamk/shapes.txt (training shapes only).

usage (repository root, on the GPU machine):
  python3 datasets/h200/gemm/v7/skfirst/skfirst.py OUT SECONDS DONE SHAPE...   (SHAPE: MxNxK-nk)
  python3 datasets/h200/gemm/v7/skfirst/skfirst.py --plan SHAPE...            (the variants, no GPU)
  python3 datasets/h200/gemm/v7/skfirst/skfirst.py --summary skfirst.json     (the figures)
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "v2" / "streamk"))
sys.path.insert(0, str(HERE.parents[1] / "v6" / "levers"))
import cntiles as ct  # noqa: E402
import lever_summary  # noqa: E402

ct.TRAIN = HERE.parent / "train"

# streamk/sktiles.py's tiles: (BLOCK_M, BLOCK_N, num_warps, num_stages); BLOCK_K 64, GROUP_M 8
SK_TILES = ((128, 256, 8, 3), (128, 256, 8, 4), (256, 128, 8, 3), (128, 128, 4, 5), (128, 128, 8, 4))


def variants(text):
    """[(kind, config)]: base (a space-7 config), skf (this schedule) or sk (skexp's, the control)."""
    m, n, k, layout = ct.parse(text)
    if layout != "nk":
        raise SystemExit(f"{text}: the stream-K kernels take B as [N, K] only")
    out = [("base", c) for c in ct.sweep_configs(text)[:6]]
    for bm, bn, warps, stages in SK_TILES:
        if bm > max(64, ct.next_pow2(m)) or bn > max(64, ct.next_pow2(n)):
            continue
        tile = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8)
        for wave in (0, 1):
            for fix in (0, 1):
                out.append(("skf", dict(tile, SK_WAVE=wave, FIX=fix, num_warps=warps, num_stages=stages)))
        out.append(("sk", dict(tile, SK_WAVE=0, num_warps=warps, num_stages=stages)))
    return out


def build(text, v, inputs, out):
    import skexp
    import skf
    from rooftune.kernels import gemm
    kind, c = v
    if kind == "base":
        return gemm.make_launcher(c, ct.parse(text)[3], inputs, out)
    if kind == "skf":
        return skf.make_launcher(c, inputs, out, c["SK_WAVE"], fix=c["FIX"])[0]
    return skexp.make_launcher(c, inputs, out, c["SK_WAVE"], 0)[0]


def summary(results):
    lever_summary.summary(results, ct.best_of, "skf", "SK-first")
    print("control, v2/streamk/skexp.py's schedule on the same tiles:")
    lever_summary.summary(results, ct.best_of, "sk", "stream-K")


# The worker processes import this module, so cntiles's functions find these there too.
ct.variants, ct.build, ct.summary = variants, build, summary
ct.summary_line = lambda r: summary([r]) or ""
_cntiles_compile_job = ct.compile_job


def compile_job(job):
    """A worker's compile: cntiles's, run where this module is imported, so its `build` is this one's."""
    return _cntiles_compile_job(job)


ct.compile_job = compile_job  # what cntiles.main hands its worker pool


def main(out_dir, seconds, done_path, shapes):
    """cntiles's loop; its results file is renamed skfirst.json, the name run.sh resumes from."""
    ct.main(out_dir, seconds, done_path, shapes)
    if (out_dir / "cntiles.json").exists():
        (out_dir / "cntiles.json").replace(out_dir / "skfirst.json")


if __name__ == "__main__":
    if sys.argv[1] == "--plan":
        for s in sys.argv[2:]:
            vs = variants(s)
            print(s, len(vs), sorted({f"{k} {c['BLOCK_M']}x{c['BLOCK_N']} w{c['num_warps']} s{c['num_stages']} "
                                      f"wave{c['SK_WAVE']} fix{c.get('FIX', '-')}" for k, c in vs if k != "base"}))
    elif sys.argv[1] == "--summary":
        summary(json.loads(Path(sys.argv[2]).read_text()))
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:])
