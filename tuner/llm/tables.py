"""What `rooftune tune model` writes: GEMM config tables in the file format vLLM and SGLang ship for their
Triton kernels, and the report of the forward pass's time, rooftune's kernels against torch's.

The tables follow vLLM's w8a8 block-FP8 GEMM configs (vllm/model_executor/layers/quantization/utils/
configs/): one JSON file per (N, K, device), named `N={N},K={K},device_name={device}.json` (the device
name as vLLM's `get_device_name_as_file_name` writes it: spaces and slashes as '_'; no `dtype=` part,
as vLLM names its unquantized fused-MoE tables), mapping M (a string key, a token count) to
{"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"}, plus
"SPLIT_K", which rooftune's GEMM kernel takes and vLLM's kernels do not. A reader picks the M key
nearest its batch, as vLLM does. The configs are for rooftune's bf16 GEMM kernel (kernels/gemm.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

from rooftune.candidates import Config, GemmShape, kernel_of, load_implementation
from rooftune.outputs import OutputError, json_text, write_all, write_atomic
from rooftune.tuner.llm.tune import ModelTune

# rooftune's GEMM parameter -> its name in vLLM's tables.
VLLM_NAMES = {"BLOCK_M": "BLOCK_SIZE_M", "BLOCK_N": "BLOCK_SIZE_N", "BLOCK_K": "BLOCK_SIZE_K",
              "GROUP_M": "GROUP_SIZE_M", "SPLIT_K": "SPLIT_K", "num_warps": "num_warps", "num_stages": "num_stages"}


class TableError(OutputError):
    """A table file already in the output folder that cannot be read (so cannot be added to)."""


def device_file_name(gpu_name: str) -> str:
    """'NVIDIA H200' -> 'NVIDIA_H200' (vLLM's get_device_name_as_file_name)."""
    return re.sub(r"[\s/]+", "_", gpu_name.strip())


def table_file_name(n: int, k: int, gpu_name: str) -> str:
    return f"N={n},K={k},device_name={device_file_name(gpu_name)}.json"


def vllm_config(config: Config) -> dict[str, int]:
    return {VLLM_NAMES[name]: config[name] for name in VLLM_NAMES}


def config_from_vllm(entry: dict, tma: int | None = None, persistent: int | None = None,
                     fixup: int | None = None, block_n2: int | None = None) -> Config:
    """The GEMM Config of one table entry (`vllm_config` read back). vLLM's tables name tiles, not
    the load path, the schedule, where split-K sums or a composite tile's second part: `tma`, `persistent`,
    `fixup` (0 or 1) and `block_n2` add the space's TMA, PERSISTENT, FIXUP and BLOCK_N2 parameters, which
    the entry does not carry (a composite winner is written as the fastest measured one-accumulator
    config: `table_config`)."""
    back = {v: k for k, v in VLLM_NAMES.items()}
    params = {back[key]: int(value) for key, value in entry.items()}
    extra = {name: value for name, value in (("TMA", tma), ("PERSISTENT", persistent), ("FIXUP", fixup),
                                             ("BLOCK_N2", block_n2)) if value is not None}
    return Config.make(params.pop("num_warps"), params.pop("num_stages"),
                       **{name: params[name] for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K")},
                       **extra)


def table_config(result) -> Config:
    """The config a table entry names for one tuned GEMM (a TuneResult): its winner, unless the winner is a
    composite tile (BLOCK_N2 > 0, space 7), which the format cannot express (its BLOCK_SIZE_N alone would
    name another, narrower tile); then the fastest measured config with one accumulator, or the winner's
    BLOCK_N part where the tune measured none."""
    winner = result.winner
    if not winner.get("BLOCK_N2"):
        return winner
    plain = [t for t in result.trials if t.ok and not t.config.get("BLOCK_N2")]
    if plain:
        return min(plain, key=lambda t: t.time_us).config
    return Config(tuple((k, 0 if k == "BLOCK_N2" else v) for k, v in winner.params), winner.num_warps,
                  winner.num_stages)


def vllm_tables(tuned: ModelTune) -> dict[str, dict[str, dict[str, int]]]:
    """File name -> {str(M): config} for every tuned GEMM of the model, M keys in increasing order
    (`table_config`: a composite winner is replaced by the fastest measured tile the format names)."""
    tables: dict[str, dict[int, dict[str, int]]] = {}
    for lt in tuned.layers:
        spec = kernel_of(lt.layer.shape)  # the families with a table format (GEMM's: gemm_table_entry)
        if spec.table is not None and lt.result is not None:
            name, m, entry = load_implementation(spec.table)(lt.layer.shape, lt.result, tuned.profile)
            tables.setdefault(name, {})[m] = entry
    return {name: {str(m): table[m] for m in sorted(table)} for name, table in tables.items()}


def gemm_table_entry(shape: GemmShape, result, gpu_name: str) -> tuple[str, int, dict[str, int]]:
    """A tuned GEMM's entry in vLLM's tables: its file (N, K, the GPU), its M key and its config (`table_config`)."""
    return table_file_name(shape.n, shape.k, gpu_name), shape.m, vllm_config(table_config(result))


def _write_table(path: Path, table: dict[str, dict[str, int]]) -> None:
    """Write one of `vllm_tables` to `path`, keeping the other M keys of a table already there (another
    model's, or another run's token counts)."""
    try:
        merged = {int(m): c for m, c in json.loads(path.read_text()).items()} if path.exists() else {}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise TableError(f"{path}: not a config table to add to ({exc}); move it away or pass another "
                         f"--out") from None
    merged.update({int(m): c for m, c in table.items()})
    write_atomic(path, json.dumps({str(m): merged[m] for m in sorted(merged)}, indent=4) + "\n")


def table_outputs(tuned: ModelTune, out: str | Path) -> list[tuple[Path, Callable[[], None]]]:
    """(path, write) for each of `vllm_tables` in folder `out`: what `write_tables` writes."""
    return [(Path(out) / name, partial(_write_table, Path(out) / name, table))
            for name, table in vllm_tables(tuned).items()]


def write_tables(tuned: ModelTune, out: str | Path) -> list[Path]:
    """Write `vllm_tables` into folder `out` (created); a table already there keeps its other M keys
    (another model's, or another run's token counts). Every table is written or named in the one
    OutputError raised after all were tried. Returns the files written."""
    return write_all(table_outputs(tuned, out))


def shape_label(shape) -> str:
    """The shape's dimensions as its family's parser reads them (`dims`): 'MxNxK' for a GEMM (always 'nk',
    bf16 here), 'BxHxSxD[xKV]' for (causal) attention."""
    return kernel_of(shape).dims(shape)


def report_dict(tuned: ModelTune) -> dict:
    """The report as JSON: every layer (time per call, runs per forward) and the forward pass per token count."""
    layers = [{"tokens": lt.layer.tokens, "layer": lt.layer.layer, "kernel": kernel_of(lt.layer.shape).name,
               "shape": shape_label(lt.layer.shape), "count": lt.layer.count,
               "config": str(lt.result.winner) if lt.result else None,
               "rooftune_us": lt.result.time_us if lt.result else None,
               "torch_us": lt.result.baseline_us if lt.result else None,
               "cached": lt.result.cached if lt.result else None, "skipped": lt.skipped}
              for lt in tuned.layers]
    forward = [{"tokens": f.tokens, "rooftune_us": f.rooftune_us, "torch_us": f.torch_us, "speedup": f.speedup,
                "skipped": list(f.skipped)} for f in tuned.forward_times()]
    return {"model": tuned.config.name, "profile": tuned.profile, "budget": tuned.budget, "seq": tuned.seq,
            "config": vars(tuned.config), "tuned": tuned.tuned, "cached": tuned.cached,
            "layers": layers, "forward": forward}


def _us(value: float | None) -> str:
    return f"{value:,.1f}" if value is not None else "-"


def report_markdown(tuned: ModelTune) -> str:
    """The report as Markdown: per token count, each layer's time per call (rooftune, torch) and the
    forward pass's total, Σ time × runs per forward."""
    c = tuned.config
    lines = [f"# {c.name} on {tuned.profile}: rooftune's kernels vs torch (cuBLAS, SDPA)", "",
             f"{c.num_layers} layers, hidden {c.hidden_size}, intermediate {c.intermediate_size}, heads "
             f"{c.heads} (kv {c.kv_heads}) × {c.head_dim}, vocab {c.vocab_size}; bf16; prefill sequences of "
             f"{tuned.seq} tokens; at most {tuned.budget} configs tuned per shape. Times in µs per call; "
             "the forward pass is Σ time × runs (GEMMs and attention only).", "",
             "| tokens | layer | shape | runs | rooftune µs | torch µs | torch / rooftune |",
             "|---:|---|---|---:|---:|---:|---:|"]
    forward = {f.tokens: f for f in tuned.forward_times()}
    for tokens, f in forward.items():
        for lt in (lt for lt in tuned.layers if lt.layer.tokens == tokens):
            r = lt.result
            ratio = f"{r.baseline_us / r.time_us:.3f}" if r and r.baseline_us else "-"
            note = f" ({lt.skipped})" if lt.skipped else ""
            lines.append(f"| {tokens} | {lt.layer.layer}{note} | {shape_label(lt.layer.shape)} | {lt.layer.count} | "
                         f"{_us(r.time_us if r else None)} | {_us(r.baseline_us if r else None)} | {ratio} |")
        left_out = f" (without {', '.join(f.skipped)})" if f.skipped else ""
        speedup = f"**{f.speedup:.3f}**" if f.speedup else "-"
        lines.append(f"| {tokens} | **forward**{left_out} | | | **{_us(f.rooftune_us)}** | **{_us(f.torch_us)}** | "
                     f"{speedup} |")
    return "\n".join(lines) + "\n"


def report_outputs(tuned: ModelTune, out: str | Path) -> list[tuple[Path, Callable[[], None]]]:
    """(path, write) for `<model>.report.json` and `<model>.report.md` in folder `out`."""
    json_path, md_path = (Path(out) / f"{tuned.config.name}.report.{ext}" for ext in ("json", "md"))
    return [(json_path, lambda: write_atomic(json_path, json_text(report_dict(tuned), indent=1))),
            (md_path, lambda: write_atomic(md_path, report_markdown(tuned)))]


def write_report(tuned: ModelTune, out: str | Path) -> list[Path]:
    """`<model>.report.json` and `<model>.report.md` in folder `out` (created), as `write_tables` writes."""
    return write_all(report_outputs(tuned, out))


def model_outputs(tuned: ModelTune, out: str | Path) -> list[tuple[Path, Callable[[], None]]]:
    """(path, write) for everything `rooftune tune model --out` writes: the tables, then the report."""
    return table_outputs(tuned, out) + report_outputs(tuned, out)
