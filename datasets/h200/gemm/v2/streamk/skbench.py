"""Stream-K diagnostics on the GPU: skexp.py's stream-K knobs beside the v2 data-parallel and persistent
schedules (kernels/gemm_v2.py) and cuBLAS, 4 tiles each, timed with kernels/timing.py; every correct variant
checked against an fp32 reference first (FIXUP 1 and 2 are timing-only, their results are wrong by design).
usage (repository root, on the GPU machine): python3 datasets/h200/gemm/v2/streamk/skbench.py OUT SECONDS SHAPE...
"""
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TILES = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (128, 128, 64, 4, 5)]
SKV = [(w, f) for w in (0, 1) for f in (0, 1, 2, 3)]


def cfg_of(t, sched):
    from rooftune.candidates import Config
    bm, bn, bk, w, s = t
    return Config.make(w, s, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, SPLIT_K=1, TMA=1, SCHEDULE=sched)


def compile_job(job):
    os.environ.pop("TRITON_INTERPRET", None)
    import torch
    from triton.runtime.jit import MockTensor
    from rooftune.candidates import parse_gemm_shape
    from rooftune.kernels import gemm_v2
    from rooftune.kernels.prebuild import offline_target
    import skexp
    kind, shape_s, t, w, f = job
    t0 = time.time()
    try:
        shape = parse_gemm_shape(shape_s, layout="nk")
        m, n, k = shape.m, shape.n, shape.k
        with offline_target(arch=90):
            if kind == "v2":
                gemm_v2.compile_kernels(shape, cfg_of(t, w))
            else:
                bm, bn, bk, nw, ns = t
                cfg = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
                a, b = MockTensor(torch.bfloat16, [m, k]), MockTensor(torch.bfloat16, [n, k])
                da, db = gemm_v2._descriptors(a, b, "nk", (m, n, k), cfg)
                skexp._sk_kernel.warmup(da, db, torch.bfloat16, torch.float32, torch.int32, 1, m, n, k, n, 1, 8,
                                        grid=(1,), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, B_NK=True, SK_WAVE=w,
                                        FIXUP=f, CHUNK=max(16, bm // 8), num_warps=nw, num_stages=ns)
        return None, time.time() - t0
    except Exception as e:
        return repr(e)[:300], time.time() - t0


def keys_for(t):
    yield ("v2", t, 0, 0), f"dp {t}"
    yield ("v2", t, 1, 0), f"persistent {t}"
    for w, f in SKV:
        yield ("sk", t, w, f), f"sk w{w} f{f} {t}"


def wait_check(shape_s):
    """Subprocess: FIXUP 3 on every tile once, correctness; exits 0 if none hung."""
    import torch
    from rooftune.candidates import parse_gemm_shape
    from rooftune.kernels import gemm
    import skexp
    shape = parse_gemm_shape(shape_s, layout="nk")
    a, b = gemm.make_inputs(shape, "cuda", 1)
    ref = (a.float() @ b.float().t())
    for t in TILES:
        for w in (0, 1):
            out = torch.full((shape.m, shape.n), float("nan"), dtype=torch.bfloat16, device="cuda")
            launch, p = skexp.make_launcher(dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"), t),
                                                 GROUP_M=8), [(a, b)], out, w, 3)
            for _ in range(3):
                launch(0)
            torch.cuda.synchronize()
            err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
            print(json.dumps({"shape": shape_s, "tile": t, "w": w, "p": p, "rel_err": err}), flush=True)


def main(out_dir, seconds, shapes):
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = {}
    for s in shapes:
        m, n, k = map(int, s.split("x"))
        groups.setdefault((n % 16, k % 16), s)
    jobs = [(kind, s, t, w, f) for s in groups.values() for t in TILES for (kind, _t, w, f), _ in keys_for(t)]
    ctx = get_context("spawn")
    with ProcessPoolExecutor(len(os.sched_getaffinity(0)), mp_context=ctx) as ex:
        res = list(ex.map(compile_job, jobs))
    bad = [(j, r) for j, r in zip(jobs, res) if r[0]]
    print(f"compiled {len(jobs)} in {time.monotonic() - started:.0f} s, {len(bad)} failed", flush=True)
    for j, r in bad[:5]:
        print("  FAIL", j, r[0], flush=True)
    # the wait-based fixup, once per tile in a subprocess that may hang
    wait_ok = True
    try:
        cp = subprocess.run([sys.executable, __file__, "--wait-check", shapes[0]], capture_output=True, text=True,
                            timeout=90)
        print(cp.stdout[-3000:], cp.stderr[-2000:], flush=True)
        wait_ok = cp.returncode == 0
    except subprocess.TimeoutExpired:
        print("wait-check HUNG", flush=True)
        wait_ok = False
    import torch
    from rooftune.candidates import parse_gemm_shape
    from rooftune.kernels import gemm, gemm_v2
    from rooftune.kernels.timing import input_sets_needed, time_candidates
    import skexp
    results = []
    for s in shapes:
        if time.monotonic() - started > seconds:
            print("out of time before", s, flush=True)
            break
        t0 = time.monotonic()
        shape = parse_gemm_shape(s, layout="nk")
        n_sets = input_sets_needed(2 * (shape.m * shape.k + shape.k * shape.n), 50 * 2 ** 20)
        inputs = [gemm.make_inputs(shape, "cuda", 100 + i) for i in range(n_sets)]
        out = torch.empty(shape.m, shape.n, dtype=torch.bfloat16, device="cuda")
        ref = inputs[0][0].float() @ inputs[0][1].float().t()
        launchers, errs, programs = {}, {}, {}
        for t in TILES:
            for (kind, _, w, f), name in keys_for(t):
                if kind == "sk" and f == 3 and not wait_ok:
                    continue
                try:
                    if kind == "v2":
                        launch = gemm_v2.make_launcher(cfg_of(t, w), "nk", inputs, out)
                    else:
                        launch, programs[name] = skexp.make_launcher(
                            dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"), t), GROUP_M=8),
                            inputs, out, w, f)
                    out.fill_(float("nan"))
                    launch(0)
                    launch(0)
                    torch.cuda.synchronize()
                    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
                    if not (err < 2e-2) and not (kind == "sk" and f in (1, 2)):
                        errs[name] = f"rel err {err}"
                        continue
                    launchers[name] = launch
                except Exception as e:
                    errs[name] = repr(e)[:200]
        weights = [(a, b.t()) for a, b in inputs]
        launchers["cublas"] = lambda i: torch.matmul(*weights[i % len(weights)], out=out)
        timed = time_candidates(launchers, rounds=9, target_ms=0.5, baseline_keys=["cublas"], mid_ratio=None,
                                prune_ratio=5.0, seed=0)
        times = {k: v.median_us for k, v in timed.items() if v.median_us is not None}
        errs.update({k: v.error for k, v in timed.items() if v.error})
        results.append({"shape": s, "times_us": times, "errors": errs, "programs": programs,
                        "seconds": round(time.monotonic() - t0, 1)})
        (out_dir / "skbench.json").write_text(json.dumps(results, indent=1))
        cb = times.get("cublas")
        fam = {}
        for k, v in times.items():
            f_ = k.rsplit(" (", 1)[0]
            fam[f_] = min(fam.get(f_, 1e9), v)
        line = "  ".join(f"{f_}:{cb / v:.3f}" for f_, v in sorted(fam.items()) if f_ != "cublas")
        print(f"{s} cublas {cb:.1f} us | {line} | errs {len(errs)} | {time.monotonic() - t0:.0f}s", flush=True)
        for k, v in errs.items():
            print("   err", k, v, flush=True)
        del inputs, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    if sys.argv[1] == "--wait-check":
        wait_check(sys.argv[2])
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])
