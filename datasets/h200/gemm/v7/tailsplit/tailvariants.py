"""Two variants of tailsplit.py's schedule, on the same training shapes, for its 4 fastest tail plans per shape
(read from tailsplit.json): the tail's partials summed inside the GEMM kernel by the split that arrives last
(FIXUP 1, no reduction kernel: "tailfix"), and the tail launched on a second stream beside the first GEMM, joined
before the call returns ("tailpar": the tail's programs take SMs as the first GEMM's finish, no gap between the
launches). Timed beside the plain tail plans ("tail"), the shape's 6 fastest space-7 configs and cuBLAS, every
launcher reference-checked first (cntiles.py's machinery through tailsplit.py).

usage (repository root):
  python3 datasets/h200/gemm/v7/tailsplit/tailvariants.py OUT SECONDS DONE SHAPE...   (GPU)
  python3 datasets/h200/gemm/v7/tailsplit/tailvariants.py --plan SHAPE...            (no GPU)
  python3 datasets/h200/gemm/v7/tailsplit/tailvariants.py --summary tailvariants.json
"""

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tailsplit as ts  # noqa: E402  (sets cntiles up: its variants, build and compile job are replaced below)

ct = ts.ct
PLANS = 4
KINDS = ("tail", "tailfix", "tailpar")


def parse_key(key):
    kind, rest = key.split(" ", 1)
    config = {}
    for item in rest.split(","):
        name, value = item.split("=")
        config[name] = value if name == "AXIS" else int(value)
    return kind, config


def variants(text):
    previous = {r["shape"]: r for r in json.loads((HERE / "tailsplit.json").read_text())}[text]
    ranked = ct.sweep_configs(text)
    out = [("base", c) for c in ranked[:6]]
    tails = sorted((us, key) for key, us in previous["times_us"].items() if key.startswith("tail "))[:PLANS]
    for _, key in tails:
        config = parse_key(key)[1]
        out += [(kind, config) for kind in KINDS]
    return out


def build(text, v, inputs, out):
    import torch
    from rooftune.kernels import gemm

    kind, c = v
    layout = ct.parse(text)[3]
    if kind == "base":
        return gemm.make_launcher(c, layout, inputs, out)
    if kind == "tail":
        return ts.hybrid_launcher(c, layout, inputs, out)
    dp = {p: x for p, x in c.items() if p not in ("AXIS", "CUT", "SPLIT")}
    parts = [ts.halves(layout, a, b, out, c["AXIS"], c["CUT"]) for a, b in inputs]
    first = gemm.make_launcher(dp, layout, [p[0][:2] for p in parts], parts[0][0][2])
    tail_cfg = {**ts.tail_config(dp, c["SPLIT"]), "FIXUP": int(kind == "tailfix")}
    tail = gemm.make_launcher(tail_cfg, layout, [p[1][:2] for p in parts], parts[0][1][2])
    if kind == "tailfix":
        def launch(i):
            first(i)
            tail(i)
        return launch
    side = torch.cuda.Stream(device=out.device)

    def launch(i):
        main = torch.cuda.current_stream(out.device)
        side.wait_stream(main)
        first(i)
        with torch.cuda.stream(side):
            tail(i)
        main.wait_stream(side)
    return launch


def summary(results):
    g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    rows = {k: [] for k in KINDS}
    for r in results:
        fam = ct.best_of(r)
        base = fam["base"][0]
        line = [f"{r['shape']:>20} cuBLAS {fam['cublas'][0]:8.2f}  base {base:8.2f}"]
        for kind in KINDS:
            us = fam.get(kind, (math.inf, "-"))[0]
            rows[kind].append(base / us)
            line.append(f"{kind} {us:8.2f} ({base / us:.3f})")
        print("  ".join(line) + f"  errors {len(r['errors'])}")
    if len(results) > 1:
        print(f"{len(results)} shapes, the space's best ÷ each kind's best, geomean: "
              + ", ".join(f"{k} {g(v):.3f} (fastest on {sum(x > 1 for x in v)})" for k, v in rows.items()))


ct.variants, ct.build, ct.summary = variants, build, summary
ct.summary_line = lambda r: summary([r]) or ""
_compile = ct.compile_job


def compile_job(job):
    return _compile(job)


ct.compile_job = compile_job


def main(out_dir, seconds, done_path, shapes):
    ct.main(out_dir, seconds, done_path, shapes)
    if (out_dir / "cntiles.json").exists():
        (out_dir / "cntiles.json").replace(out_dir / "tailvariants.json")


if __name__ == "__main__":
    if sys.argv[1] == "--plan":
        for s in sys.argv[2:]:
            vs = variants(s)
            print(s, len(vs), sorted({f"{k} {c['AXIS']}@{c['CUT']} S{c['SPLIT']} {c['BLOCK_M']}x{c['BLOCK_N']}"
                                      for k, c in vs if k != "base"})[:6])
    elif sys.argv[1] == "--summary":
        summary(json.loads(Path(sys.argv[2]).read_text()))
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:])
