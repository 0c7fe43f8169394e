"""The levers space 5 does not hold, timed on training shapes beside their space-5 best configs and cuBLAS
(lvexp.py has the variants): a tensor-descriptor store of C (SUBTILE 1) and epilogue subtiling (SUBTILE 2),
one tile per program and persistent; 2-CTA clusters (num_ctas = 2); split-K summed in the kernel
(FIXUP = 1) above M = 64. Also the name of the kernel cuBLAS runs on each shape (torch.profiler).

Per shape, the configs come from its space-5 sweep (datasets/h200/gemm/v5/train, training shapes only:
what this measures may decide a later space): the 6 fastest as they are ("base"), and the variants of the
fastest TMA configs without split-K. Every launcher passes kernels/check.py's relative-error bound
against an fp64 reference before it is timed; all are timed in one interleaved pass (kernels/timing.py)
with cuBLAS. Compiles run first, in parallel worker processes (each launches its job once).

Resumable: shapes already in DONE (a previous call's levers.json) are kept and skipped.
usage (repository root, on the GPU machine): python3 datasets/h200/gemm/v5/levers/levers.py OUT SECONDS DONE SHAPE...
  SHAPE: MxNxK-layout, e.g. 256x10240x8192-nk
"""

import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from rooftune.hwprofiles import load_profile

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
TRAIN = HERE.parent / "train"
PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K", "TMA", "PERSISTENT", "FIXUP", "num_warps",
          "num_stages")
SMS_FALLBACK = load_profile("h200").sm_count  # --plan, without a GPU to ask


def parse(text):
    dims, layout = text.rsplit("-", 1)
    m, n, k = map(int, dims.split("x"))
    return m, n, k, layout


def sweep_configs(text, train=TRAIN):
    """The shape's training sweep in `train` (default space 5's): in-space configs without error, fastest first."""
    from rooftune.candidates import GemmShape
    from rooftune.eval.dataset import read_shape, shape_files
    m, n, k, layout = parse(text)
    want = GemmShape(m, n, k, layout=layout, dtype="bf16")
    for path in shape_files(train):
        res = read_shape(path)
        if res.shape == want:
            rows = [r for r in res.rows if r.in_space and not r.error and r.time_us]
            return [dict(r.config) for r in sorted(rows, key=lambda r: r.time_us)]
    raise SystemExit(f"{text}: not a training shape of {train}")


def cfg_name(c):
    return ",".join(f"{p}={c[p]}" for p in PARAMS)


def variants(text, sms=SMS_FALLBACK):
    """[(kind, config, extra)] for one shape; kind in base, store, pstore, ctas2, fixup."""
    m, n, k, layout = parse(text)
    configs = sweep_configs(text)
    tiles = lambda c: -(-m // c["BLOCK_M"]) * -(-n // c["BLOCK_N"])
    out = [("base", c, 0) for c in configs[:6]]
    plain = []
    for c in configs:
        if c["TMA"] == 1 and c["SPLIT_K"] == 1:
            c = {**c, "PERSISTENT": 0, "FIXUP": 0}
            if c not in plain:
                plain.append(c)
    for c in plain[:4]:
        out += [("store", c, 1), ("store", c, 2)]
        if tiles(c) >= 2 * sms and c["BLOCK_M"] * c["BLOCK_N"] >= 128 * 128:
            out += [("pstore", {**c, "PERSISTENT": 1}, 1), ("pstore", {**c, "PERSISTENT": 1}, 2)]
    for c in plain[:3]:
        out.append(("ctas2", c, 0))
        if c["BLOCK_M"] <= 128:
            out.append(("ctas2", {**c, "BLOCK_M": 2 * c["BLOCK_M"]}, 0))
    if m > 64:
        for c in [c for c in plain if tiles(c) < sms][:3]:
            for split in (2, 4):
                if -(-k // c["BLOCK_K"]) >= 2 * split:
                    out += [("fixup", {**c, "SPLIT_K": split, "FIXUP": f}, 0) for f in (1, 0)]
    seen, unique = set(), []
    for v in out:
        key = (v[0], cfg_name(v[1]), v[2])
        if key not in seen:
            seen.add(key)
            unique.append(v)
    return unique


def key_of(v):
    kind, c, extra = v
    return f"{kind}{extra or ''} {cfg_name(c)}"


def build(text, v, inputs, out):
    import torch
    import lvexp
    from rooftune.kernels import gemm
    _, _, _, layout = parse(text)
    kind, c, extra = v
    if kind in ("base", "fixup"):
        return gemm.make_launcher(c, layout, inputs, out)
    if kind in ("store", "pstore"):
        sms = torch.cuda.get_device_properties(out.device).multi_processor_count
        return lvexp.store_launcher(c, layout, inputs, out, extra, kind == "pstore", sms)[0]
    return lvexp.ctas2_launcher(c, layout, inputs, out)


def compile_job(job):
    """Worker: build the variant on one input set and launch it once (compiles into Triton's cache)."""
    os.environ.pop("TRITON_INTERPRET", None)
    import torch
    from rooftune.candidates import GemmShape
    from rooftune.kernels import gemm
    text, v = job
    t0 = time.time()
    try:
        m, n, k, layout = parse(text)
        inputs = [gemm.make_inputs(GemmShape(m, n, k, layout=layout, dtype="bf16"), "cuda", 1)]
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        build(text, v, inputs, out)(0)
        torch.cuda.synchronize()
        return None, time.time() - t0
    except Exception as e:
        return repr(e)[:300], time.time() - t0


def cublas_kernels(a, b_t, out):
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.matmul(a, b_t, out=out)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.matmul(a, b_t, out=out)
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")})


def time_shape(text, vs):
    import torch
    from rooftune.candidates import GemmShape
    from rooftune.kernels import gemm
    from rooftune.kernels.check import TOLERANCE, relative_error
    from rooftune.kernels.timing import input_sets_needed, time_candidates
    m, n, k, layout = parse(text)
    shape = GemmShape(m, n, k, layout=layout, dtype="bf16")
    n_sets = input_sets_needed(2 * (m * k + k * n), 50 * 2 ** 20)
    inputs = [gemm.make_inputs(shape, "cuda", 100 + i) for i in range(n_sets)]
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    a0, b0 = inputs[0]
    ref = gemm.reference(a0, b0, layout)
    weights = [(a, b if layout == "kn" else b.t()) for a, b in inputs]
    names = cublas_kernels(*weights[0], out)
    launchers, errors = {}, {}
    for v in vs:
        key = key_of(v)
        try:
            launch = build(text, v, inputs, out)
            out.fill_(float("nan"))
            launch(0)
            torch.cuda.synchronize()
            err = relative_error(out, ref)
            if not err <= TOLERANCE[torch.bfloat16]:
                errors[key] = f"relative error {err:.3g}"
                continue
            launchers[key] = launch
        except Exception as e:
            errors[key] = repr(e)[:200]
    launchers["cublas"] = lambda i: torch.matmul(*weights[i % len(weights)], out=out)
    timed = time_candidates(launchers, rounds=9, target_ms=0.5, baseline_keys=["cublas"], mid_ratio=None,
                            prune_ratio=1.6, seed=0)
    times = {key: t.median_us for key, t in timed.items() if t.median_us is not None}
    errors.update({key: t.error for key, t in timed.items() if t.error})
    return {"shape": text, "cublas_kernels": names, "times_us": times, "errors": errors}


def summary_line(r):
    t = r["times_us"]
    cb = t.get("cublas")
    fam = {}
    for key, us in t.items():
        if key != "cublas":
            kind = key.split(" ")[0]
            fam[kind] = min(fam.get(kind, float("inf")), us)
    base = fam.get("base")
    rest = "  ".join(f"{kind} {base / us:.3f}" for kind, us in sorted(fam.items()) if kind != "base")
    kern = ";".join(n[:60] for n in r["cublas_kernels"])
    return (f"{r['shape']:>20} cuBLAS {cb:8.2f} µs  base {base:8.2f} µs (cuBLAS÷base {cb / base:.3f}) | "
            f"base÷variant: {rest} | errors {len(r['errors'])} | {kern}")


def main(out_dir, seconds, done_path, shapes):
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    results = json.loads(Path(done_path).read_text()) if done_path != "-" and Path(done_path).exists() else []
    done = {r["shape"] for r in results}
    todo = [s for s in shapes if s not in done]
    per_shape = {s: variants(s) for s in todo}
    jobs, seen = [], set()
    for s, vs in per_shape.items():
        for v in vs:
            kind, c, extra = v
            key = (kind, cfg_name(c), extra, parse(s)[3])
            if key not in seen:
                seen.add(key)
                jobs.append((s, v))
    with ProcessPoolExecutor(min(12, len(os.sched_getaffinity(0))), mp_context=get_context("spawn")) as ex:
        res = list(ex.map(compile_job, jobs))
    bad = [(j, r) for j, r in zip(jobs, res) if r[0]]
    print(f"compiled {len(jobs)} variants in {time.monotonic() - started:.0f} s, {len(bad)} failed", flush=True)
    for (s, v), r in bad[:12]:
        print(f"  FAIL {s} {key_of(v)}: {r[0][:160]}", flush=True)
    for s in todo:
        if time.monotonic() - started > seconds:
            print("out of time before", s, flush=True)
            break
        t0 = time.monotonic()
        r = time_shape(s, per_shape[s])
        r["seconds"] = round(time.monotonic() - t0, 1)
        results.append(r)
        tmp = out_dir / "levers.json.tmp"
        tmp.write_text(json.dumps(results, indent=1))
        tmp.replace(out_dir / "levers.json")
        print(summary_line(r), flush=True)
    print("\nall shapes:")
    for r in results:
        print(summary_line(r))


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:])
