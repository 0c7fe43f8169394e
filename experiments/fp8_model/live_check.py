"""The live FP8 table's entries (datasets/h200/moe_fp8/live/deepseek_v3_tp8_block_tune.log) scored on the held-out
sweep of its layer: per GEMM and by the layer's time, beside vLLM's shipped table."""
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "device"))
from moe_live import layer_figures, layer_records, score_table  # noqa: E402

from rooftune.eval.datasets import readers  # noqa: E402
from rooftune.hwprofiles import load_profile  # noqa: E402

ROW = re.compile(r"^\s*(\d+)\s+(\d+)x(\d+)x(\d+) gm(\d+) w(\d+) s(\d+)\s")
table = {}
for line in Path("datasets/h200/moe_fp8/live/deepseek_v3_tp8_block_tune.log").read_text().splitlines():
    m = ROW.match(line)
    if m:
        bm, bn, bk, gm, w, s = map(int, m.groups()[1:])
        table[m.group(1)] = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm,
                             "num_warps": w, "num_stages": s}
profile = load_profile("h200")
records = layer_records(readers.load_records(Path("datasets/h200/moe_fp8/heldout")), (256, 8, 7168, 2048, 8))
print(f"{len(table)} entries, {len(records)} recorded shapes")
scores = score_table(records, table, profile)  # the entry at the nearest M, as vLLM looks it up
for gemm, v in scores.items():
    print(f"{gemm}: mean {statistics.fmean(v):.3f}, worst {min(v):.3f}")
print({k: round(v, 3) for k, v in layer_figures(records, table, profile).items()})
