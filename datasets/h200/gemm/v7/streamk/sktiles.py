"""Stream-K against space 7, on training shapes of a wave and a fraction: v2/streamk/skexp.py's data-parallel +
stream-K schedule (its FIXUP 0, the last contributor sums the fp32 partials; SK_WAVE 0 and 1) timed beside each
shape's 6 fastest space-7 configs and cuBLAS, to decide whether a later space holds it. The method and machinery
are v6/levers/cntiles.py's (imported, not copied): every launcher passes kernels/check.py's bound against an fp64
reference, then all are timed in one interleaved pass; compiles run first, in worker processes. Resumable (DONE:
a previous call's sktiles.json). B as [N, K] only (skexp's layout).

Space 2 measured this schedule against space 2's kernel and found its fix-up too dear (v2/streamk/README.md);
space 7's configs are faster, and the shapes here are the training shapes where space 7 still trails cuBLAS
with one to a few waves of large tiles (256x22016x4096 at 0.849, 3359x1536x1536 at 0.872).

usage (repository root, on the GPU machine):
  python3 datasets/h200/gemm/v7/streamk/sktiles.py OUT SECONDS DONE SHAPE...   (SHAPE: MxNxK-nk)
  python3 datasets/h200/gemm/v7/streamk/sktiles.py --plan SHAPE...            (the variants, no GPU)
  python3 datasets/h200/gemm/v7/streamk/sktiles.py --summary sktiles.json     (the figures)
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "v2" / "streamk"))
sys.path.insert(0, str(HERE.parents[1] / "v6" / "levers"))
import cntiles as ct  # noqa: E402
import lever_summary  # noqa: E402

ct.TRAIN = HERE.parent / "train"

# skbench's four tiles (space 2's measurement) and 128x128 on 8 warps; BLOCK_K 64, GROUP_M 8
SK_TILES = ((128, 256, 8, 3), (128, 256, 8, 4), (256, 128, 8, 3), (128, 128, 4, 5), (128, 128, 8, 4))


def variants(text):
    """[(kind, config)]: kind base (a space-7 config) or sk (SK_WAVE in the config)."""
    m, n, k, layout = ct.parse(text)
    if layout != "nk":
        raise SystemExit(f"{text}: skexp's stream-K takes B as [N, K] only")
    out = [("base", c) for c in ct.sweep_configs(text)[:6]]
    for bm, bn, warps, stages in SK_TILES:
        if bm > max(64, ct.next_pow2(m)) or bn > max(64, ct.next_pow2(n)):
            continue
        for wave in (0, 1):
            out.append(("sk", dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, SK_WAVE=wave, num_warps=warps,
                                   num_stages=stages)))
    return out


def build(text, v, inputs, out):
    import skexp
    from rooftune.kernels import gemm
    kind, c = v
    if kind == "base":
        return gemm.make_launcher(c, ct.parse(text)[3], inputs, out)
    return skexp.make_launcher(c, inputs, out, c["SK_WAVE"], 0)[0]


def summary(results):
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
    """cntiles's loop; its results file is renamed sktiles.json, the name run.sh resumes from."""
    ct.main(out_dir, seconds, done_path, shapes)
    if (out_dir / "cntiles.json").exists():
        (out_dir / "cntiles.json").replace(out_dir / "sktiles.json")


if __name__ == "__main__":
    if sys.argv[1] == "--plan":
        for s in sys.argv[2:]:
            vs = variants(s)
            print(s, len(vs), sorted({f"{c['BLOCK_M']}x{c['BLOCK_N']} w{c['num_warps']} s{c['num_stages']} "
                                      f"wave{c['SK_WAVE']}" for k, c in vs if k == "sk"}))
    elif sys.argv[1] == "--summary":
        summary(json.loads(Path(sys.argv[2]).read_text()))
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:])
