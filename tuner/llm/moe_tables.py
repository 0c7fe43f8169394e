"""vLLM's fused-MoE config tables: writing and reading them in vLLM's exact file name and format, its lookup
(the nearest token count), its fallback rule for a missing table, and the H200 tables it ships.

A table is one JSON file per (experts E, N, device), named `E={E},N={N},device_name={device}.json` (vLLM's
`get_config_file_name` for unquantized weights; N is the intermediate size per tensor-parallel shard, vLLM's
w2.shape[2]; the device as `get_device_name_as_file_name` writes it; FP8 weights add `,dtype=fp8_w8a8` and, with
128×128 block scales, `,block_shape=[128,128]`: `layer_table_name`), mapping each token count M, a string
key, to the six keys BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps, num_stages. vLLM reads
it from `VLLM_TUNED_CONFIG_FOLDER` or its own configs/ folder and serves both GEMMs of the layer with the entry
of the M key nearest the batch (`try_get_optimal_moe_config`). The configs are points of the MoE space
(candidates/moe_space.py), whose parameters carry vLLM's names. vLLM's newer tables carry the Triton release they
were tuned under as a "triton_version" key, which its loader drops; so do these, in vLLM's layout.

SGLang reads the same format from `$SGLANG_MOE_CONFIG_DIR/configs/triton_X_Y_Z/` (the installed Triton's version
with '_' for '.'; where that folder lacks the file, the other versions it lists, newest first, with a warning),
and a down-projection table beside the up one as `..._down.json`, whose BLOCK_SIZE_M must be the up entry's
(older releases assert it, newer overwrite it). Its loader (older releases) reads every key as a token count, so
the SGLang layout names the Triton release by its folder and leaves the key out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from rooftune.candidates import MOE_SPACE, Config, MoeFp8Shape
from rooftune.candidates.families import TableDtype, table_dtype_of
from rooftune.outputs import write_atomic
from rooftune.tuner.llm.tables import TableError, device_file_name

# The six keys of an entry, in vLLM's order: the MoE space's grid.
VLLM_KEYS = tuple(MOE_SPACE.names)
_DATASETS = Path(__file__).resolve().parents[2] / "datasets" / "h200"
SHIPPED_H200 = _DATASETS / "moe" / "vllm" / "h200_tables.json"          # its unquantized (bf16) tables
SHIPPED_FP8_H200 = _DATASETS / "moe_fp8" / "vllm" / "h200_tables.json"  # its dtype=fp8_w8a8[,block_shape] tables


def table_file_name(experts: int, n: int, gpu_name: str, dtype: str | None = None, down: bool = False,
                    block_shape: tuple[int, int] | None = None) -> str:
    """'E=128,N=768,device_name=NVIDIA_H200.json'; with `dtype` (vLLM's quantized tables: 'fp8_w8a8', ...)
    ',dtype=...' before '.json'; bf16 and fp16 tables carry none; with `block_shape` (block-quantized weights),
    ',block_shape=[128,128]' after it, as vLLM's `get_config_file_name` writes it. With `down`, '_down' before
    '.json': SGLang's name for a down-projection table tuned apart from the gate_up one (sgl-project/sglang PR
    #39153: the up table keeps vLLM's name); vLLM reads only the one table, for both GEMMs."""
    block = f",block_shape=[{block_shape[0]},{block_shape[1]}]" if block_shape else ""
    return (f"E={experts},N={n},device_name={device_file_name(gpu_name)}" + (f",dtype={dtype}" if dtype else "")
            + block + ("_down" if down else "") + ".json")


def layer_table_name(experts: int, n: int, gpu_name: str, dtype: TableDtype | None = None, down: bool = False) -> str:
    """`table_file_name` of a layer whose weights are of the table dtype `dtype` (candidates/families.py; None:
    unquantized): 'E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json'."""
    return table_file_name(experts, n, gpu_name, dtype.file_dtype if dtype else None, down,
                           dtype.block_shape if dtype else None)


def shape_table_name(shape, gpu_name: str, down: bool = False) -> str:
    """The vLLM table a fused-MoE GEMM `shape` is served from on `gpu_name` (both GEMMs read the one table; `down`:
    SGLang's `_down` table)."""
    return layer_table_name(shape.experts, shape.intermediate, gpu_name, table_dtype_of(shape), down)


def moe_fp8_table_entry(shape: MoeFp8Shape, result, gpu_name: str) -> tuple[str, int, dict[str, int]]:
    """A tuned FP8 MoE GEMM's entry in vLLM's tables: its file ('E=..,N=..,device_name=..,dtype=fp8_w8a8[,
    block_shape=[128,128]]', `_down` for the down GEMM as the split tables name it), its M key and its config."""
    return (shape_table_name(shape, gpu_name, shape.gemm == "down"), shape.tokens,
            {key: int(result.winner[key]) for key in VLLM_KEYS})


LAYOUTS = ("vllm", "sglang")
TRITON_KEY = "triton_version"


def check_layout(layout: str) -> str:
    """`layout` where it is one of LAYOUTS, else a TableError."""
    if layout not in LAYOUTS:
        raise TableError(f"--layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return layout


def table_folder(out: str | Path, layout: str, triton: str | None) -> Path:
    """Where an engine reads the tables under `out`: `out` itself for vLLM (VLLM_TUNED_CONFIG_FOLDER=out), SGLang's
    `out/configs/triton_3_6_0/` for Triton 3.6.0 (SGLANG_MOE_CONFIG_DIR=out). A TableError for another layout, or
    the SGLang layout without a Triton release to name its folder."""
    if check_layout(layout) == "vllm":
        return Path(out)
    if not triton:
        raise TableError("the SGLang layout names its folder by the Triton release, and none is installed")
    return Path(out) / "configs" / f"triton_{triton.replace('.', '_')}"


def table_text(table: Mapping[int, Config], triton: str | None = None) -> str:
    """The file's text: {str(M): {the six keys}} in increasing M (after "triton_version" where `triton` is
    given), indented by 4 as vLLM's files are."""
    entries = {TRITON_KEY: triton} if triton else {}
    entries.update({str(m): {key: int(table[m][key]) for key in VLLM_KEYS} for m in sorted(table)})
    return json.dumps(entries, indent=4) + "\n"


def write_table(path: str | Path, table: Mapping[int, Config], merge: bool = True, triton: str | None = None
                ) -> Path:
    """Write `table` (token count -> config) to `path` in vLLM's format, atomically (with `triton`, the release it
    was tuned under as "triton_version"); with `merge`, the other M keys of a table already there stay (another
    run's token counts). Returns the path."""
    path = Path(path)
    merged = dict(read_table(path)) if merge and path.exists() else {}
    merged.update(table)
    write_atomic(path, table_text(merged, triton))
    return path


def config_of(entry: Mapping[str, int]) -> Config:
    """The MoE space's Config of one table entry: the six keys (vLLM's extra keys, such as SPLIT_K or ROCm's
    kpack, are not parameters of this kernel and are left out); a missing key is a TableError."""
    missing = [key for key in VLLM_KEYS if key not in entry]
    if missing:
        raise TableError(f"table entry {dict(entry)} lacks {', '.join(missing)}")
    params = {key: int(entry[key]) for key in VLLM_KEYS}
    return Config.make(params.pop("num_warps"), params.pop("num_stages"), **params)


def read_table(path: str | Path) -> dict[int, Config]:
    """A vLLM table file as {M: Config}, in the file's key order (what vLLM's nearest-key lookup iterates)."""
    try:
        data = json.loads(Path(path).read_text())
        data.pop(TRITON_KEY, None)  # as vLLM's loader drops it
        return {int(m): config_of(entry) for m, entry in data.items()}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError) as exc:
        raise TableError(f"{path}: not a vLLM fused-MoE config table ({exc})") from None


def lookup(table: Mapping[int, Config], tokens: int) -> Config:
    """The entry vLLM runs for a batch of `tokens`: the M key nearest to it (`min(keys, key=|key - M|)` over the
    keys in the table's order, so a tie goes to the key listed first: the smaller, in vLLM's files)."""
    if not table:
        raise TableError("an empty table has no config for any batch")
    return table[min(table, key=lambda m: abs(m - tokens))]


def shipped_tables(*paths: str | Path) -> dict[str, dict[int, Config]]:
    """vLLM's shipped tables stored in the compact form of datasets/h200/moe/vllm and moe_fp8/vllm (file name ->
    {M: Config}), from `paths` (default: both, the bf16 and the FP8 ones; their file names differ by the dtype);
    each table's vLLM commit is in its file and its card."""
    out = {}
    for path in paths or (SHIPPED_H200, SHIPPED_FP8_H200):
        data = json.loads(Path(path).read_text())
        columns = data["columns"]
        out.update({name: {int(m): config_of(dict(zip(columns, values))) for m, values in table["configs"].items()}
                    for name, table in data["tables"].items()})
    return out


def default_config(tokens: int, experts: int, n: int, k: int, topk: int, dtype: str | None = None) -> Config:
    """vLLM's fallback for an unquantized (bf16/fp16) layer without a table on CUDA, `get_default_config` since
    its PR #34846 (2026-02), whose rules were read from the shipped tables. The arguments are vLLM's: `tokens`
    the batch M, `n` the shard's intermediate size, `k` hidden (neither changes the unquantized rule), `dtype` the
    table's dtype (its file name's: None unquantized; a quantized one is a TableError: vLLM's rules for FP8, changed
    since by its PRs #34846 and #46642, are not modelled here):
    BLOCK_SIZE_M 16 / 32 / 64 / 128 up to M = 32 / 96 / 512 / beyond; BLOCK_SIZE_N 64 up to M = 64, else 128;
    BLOCK_SIZE_K 128 up to M = 64, else 64; GROUP_SIZE_M 16 where M // E > 128, else 1; 4 warps up to M = 128,
    else 8; 4 stages up to M = 32, else 3. (vLLM's SPLIT_K = 1 is not a parameter of this kernel.)"""
    if dtype is not None:
        raise TableError(f"vLLM's default rule for {dtype} tables is not modelled here (only its unquantized one)")
    block_m = 16 if tokens <= 32 else 32 if tokens <= 96 else 64 if tokens <= 512 else 128
    return Config.make(4 if tokens <= 128 else 8, 4 if tokens <= 32 else 3,
                       BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=64 if tokens <= 64 else 128,
                       BLOCK_SIZE_K=128 if tokens <= 64 else 64,
                       GROUP_SIZE_M=16 if tokens // max(experts, 1) > 128 else 1)
