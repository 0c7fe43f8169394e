"""The frozen HardwareProfile, its JSON form, and validation of profile files."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rooftune.inputs import check_input, read_text
from rooftune.outputs import write_atomic


class ProfileError(ValueError):
    """A hardware profile file is missing, malformed, or has a bad field."""


@dataclass(frozen=True)
class HardwareProfile:
    """Everything the cost model knows about one GPU.

    Rates are what the model divides by: `dram_bw_gbps` counts bytes read plus bytes written
    (a device-to-device copy of N bytes moves 2N), tensor rates are dense (no sparsity).
    `smem_bytes_per_clock` is one SM's shared-memory bandwidth per SM clock; `fp32_lanes_per_sm` and
    `sfu_ops_per_clock` are one SM's 32-bit FP add/mul/FMA results and special-function results (exp2,
    rcp, ...) per SM clock (the CUDA C Programming Guide's arithmetic throughput table). The latencies are the
    effective round trip of one pipelined load from L2 or DRAM on a loaded GPU (what a software
    pipeline must cover, Little's law), not an idle pointer-chase figure. `mma_latency_clocks` is one
    dependent matrix-instruction group's latency from issue to a usable accumulator, beyond its
    throughput time, in SM clocks (what a loop of dependent MMAs, such as attention's, waits on).
    `sources` maps a field name to where its number came from ("probed 2026-11-29",
    "datasheet", "estimate: ...").
    """

    name: str
    sm_count: int
    sm_clock_mhz: float
    mem_clock_mhz: float
    smem_per_sm_bytes: int
    smem_per_block_bytes: int
    regs_per_sm: int
    regs_per_thread_max: int
    max_threads_per_sm: int
    max_ctas_per_sm: int
    l2_bytes: int
    dram_bw_gbps: float
    l2_bw_gbps: float
    smem_bytes_per_clock: int
    fp32_lanes_per_sm: int
    sfu_ops_per_clock: int
    l2_latency_ns: float
    dram_latency_ns: float
    mma_latency_clocks: float
    bf16_tflops: float
    fp16_tflops: float
    tf32_tflops: float
    fp32_tflops: float
    launch_overhead_us: float
    compute_capability: tuple[int, int]
    fp8_tflops: float | None = None  # optional: a GPU without FP8 tensor cores (A100) has none
    # The smallest piece of a row that DRAM reads at full rate: a tile reading each row in shorter pieces (FP8 with
    # BLOCK_SIZE_K 64) pays for whole ones (roofline/moe.py `short_row_cost`). The L2 line, 128 bytes on NVIDIA GPUs
    # since Fermi (the default where a profile has none); its effect was checked on the FP8 fused-MoE training data.
    dram_piece_bytes: int = 128
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    meta: dict[str, str] = field(default_factory=dict, compare=False)

    def tensor_tflops(self, dtype: str) -> float:
        """Dense matrix-unit rate (TFLOP/s) for operands of `dtype` ('bf16', 'fp16', 'tf32', 'fp32', 'fp8e4m3');
        ProfileError for FP8 where the profile has no `fp8_tflops` (a GPU without FP8 matrix units)."""
        rates = {"bf16": self.bf16_tflops, "fp16": self.fp16_tflops,
                 "tf32": self.tf32_tflops, "fp32": self.fp32_tflops, "fp8e4m3": self.fp8_tflops}
        if dtype == "fp8e4m3" and self.fp8_tflops is None:
            raise ProfileError(f"profile {self.name} has no fp8_tflops: its GPU has no FP8 tensor rate to model")
        if dtype not in rates:
            raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(rates)}")
        return rates[dtype]


_INT_FIELDS = {"sm_count", "smem_per_sm_bytes", "smem_per_block_bytes", "regs_per_sm",
               "regs_per_thread_max", "max_threads_per_sm", "max_ctas_per_sm", "l2_bytes", "smem_bytes_per_clock",
               "fp32_lanes_per_sm", "sfu_ops_per_clock", "dram_piece_bytes"}
_FLOAT_FIELDS = {"sm_clock_mhz", "mem_clock_mhz", "dram_bw_gbps", "l2_bw_gbps", "bf16_tflops",
                 "fp16_tflops", "tf32_tflops", "fp32_tflops", "launch_overhead_us", "l2_latency_ns",
                 "dram_latency_ns", "mma_latency_clocks", "fp8_tflops"}
# Above this no field of any GPU's profile lies (the largest, l2_bytes, is ~1e8 today); larger numbers are a typo
# or a unit slip, and near float's range they overflow the model's arithmetic to inf.
PLAUSIBLE_LIMIT = 1e12
# Below these no GPU's figure lies: each is 10 to 1,000 times under the smallest shipped profile's (the A100's clocks,
# rates and memories) and under anything a GPU that runs Triton has had. A smaller number is a typo or a unit slip
# that the model turns into nonsense: a rate of 1e-300 into 300-digit times, a bandwidth of 5e-324 into NaN, an SM of
# one thread (under one warp, 32) into a GPU on which every config looks legal.
PLAUSIBLE_FLOOR = {
    "sm_count": 1, "sm_clock_mhz": 100.0, "mem_clock_mhz": 100.0, "smem_per_sm_bytes": 1024,
    "smem_per_block_bytes": 1024, "regs_per_sm": 1024, "regs_per_thread_max": 16, "max_threads_per_sm": 32,
    "max_ctas_per_sm": 1, "l2_bytes": 1024, "dram_bw_gbps": 1.0, "l2_bw_gbps": 1.0, "smem_bytes_per_clock": 1,
    "fp32_lanes_per_sm": 1, "sfu_ops_per_clock": 1, "l2_latency_ns": 1.0, "dram_latency_ns": 1.0,
    "mma_latency_clocks": 1.0, "bf16_tflops": 0.01, "fp16_tflops": 0.01, "tf32_tflops": 0.01, "fp32_tflops": 0.01,
    "fp8_tflops": 0.01, "launch_overhead_us": 0.01, "dram_piece_bytes": 1,
}
# Numbers a profile may lack: fp8_tflops (a GPU without FP8 matrix units; None when absent), dram_piece_bytes (its
# default when absent).
_OPTIONAL = ("fp8_tflops", "dram_piece_bytes")
_REQUIRED = [f.name for f in dataclasses.fields(HardwareProfile) if f.name not in ("sources", "meta", *_OPTIONAL)]


def profile_from_dict(data: Any, origin: str = "<dict>") -> HardwareProfile:
    """Validate `data` (parsed JSON) and build a profile; errors name `origin` and the field."""
    if not isinstance(data, dict):
        raise ProfileError(f"{origin}: expected a JSON object, got {type(data).__name__}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ProfileError(f"{origin}: missing field(s) {', '.join(missing)}")
    kwargs: dict[str, Any] = {}
    for key in [*_REQUIRED, *(k for k in _OPTIONAL if k in data)]:
        value = data[key]
        if key == "name":
            if not isinstance(value, str) or not value:
                raise ProfileError(f"{origin}: field 'name' must be a non-empty string")
        elif key == "compute_capability":
            if (not isinstance(value, (list, tuple)) or len(value) != 2
                    or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
                raise ProfileError(f"{origin}: field 'compute_capability' must be [major, minor] integers, "
                                   f"got {value!r}")
            value = (int(value[0]), int(value[1]))
        elif key in _INT_FIELDS:
            if not isinstance(value, int) or isinstance(value, bool):
                raise ProfileError(f"{origin}: field {key!r} must be an integer, got {value!r}")
            if value <= 0:
                raise ProfileError(f"{origin}: field {key!r} must be positive, got {value}")
        elif key in _FLOAT_FIELDS:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ProfileError(f"{origin}: field {key!r} must be a number, got {value!r}")
            value = float(value)
            if not (math.isfinite(value) and value > 0):  # JSON's Infinity and NaN parse as floats
                raise ProfileError(f"{origin}: field {key!r} must be positive and finite, got {value}")
        if key in _INT_FIELDS | _FLOAT_FIELDS and value > PLAUSIBLE_LIMIT:
            raise ProfileError(f"{origin}: field {key!r} is implausibly large ({value:g} > {PLAUSIBLE_LIMIT:g})")
        if key in PLAUSIBLE_FLOOR and value < PLAUSIBLE_FLOOR[key]:
            raise ProfileError(f"{origin}: field {key!r} is implausibly small ({value:g} < {PLAUSIBLE_FLOOR[key]:g}, "
                               f"under any GPU's; a unit slip?)")
        kwargs[key] = value
    for key in ("sources", "meta"):
        value = data.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ProfileError(f"{origin}: field {key!r} must map names to strings")
        kwargs[key] = dict(value)
    if kwargs["smem_per_block_bytes"] > kwargs["smem_per_sm_bytes"]:
        raise ProfileError(f"{origin}: smem_per_block_bytes exceeds smem_per_sm_bytes")
    unknown = set(data) - set(_REQUIRED) - set(_OPTIONAL) - {"sources", "meta"}
    if unknown:
        raise ProfileError(f"{origin}: unknown field(s) {', '.join(sorted(unknown))}")
    return HardwareProfile(**kwargs)


def profile_to_dict(profile: HardwareProfile) -> dict[str, Any]:
    data = dataclasses.asdict(profile)
    data["compute_capability"] = list(profile.compute_capability)
    for key in _OPTIONAL:
        if data[key] is None:
            del data[key]
    return data


def _builtin_dir():
    return resources.files("rooftune.hwprofiles")


def list_profiles() -> list[str]:
    """Names of the profiles shipped with rooftune (JSON files in this package)."""
    return sorted(p.name[:-5] for p in _builtin_dir().iterdir() if p.name.endswith(".json"))


def fits_device(profile: HardwareProfile, device: dict) -> bool:
    """Whether `profile` fits what a dataset says about its GPU (eval/datasets/readers.py `recorded_device`): the
    same profile name, or the same compute capability and shared memory per block (a profile of an SM
    partition, `hwprobe --sms`, only by name: such data say nothing of a partition)."""
    if "name" in device:
        return profile.name == device["name"]
    if profile.meta.get("sm_partition"):
        return False
    return (tuple(profile.compute_capability) == tuple(device["compute_capability"])
            and profile.smem_per_block_bytes == device["smem_per_block_bytes"])


def is_profile_of(profile: HardwareProfile, gpu_name: str) -> bool:
    """Whether `profile` describes the GPU the driver names `gpu_name`: its name starts with the driver's (the H100's
    "NVIDIA H100 80GB HBM3 (SXM)" for "NVIDIA H100 80GB HBM3"), or its meta names that GPU (a profile of an SM
    partition, `rooftune hwprobe --sms N`)."""
    gpu_name = gpu_name.strip()
    return profile.name.startswith(gpu_name) or profile.meta.get("gpu") == gpu_name


def profiles_fitting(device: dict) -> list[str]:
    """The shipped profiles (by name) that fit a dataset's GPU (`fits_device`)."""
    return [name for name in list_profiles() if fits_device(load_profile(name), device)]


def _names_a_path(text: str) -> bool:
    """Whether `load_profile(text)` reads a path (else a shipped profile's name)."""
    return text.endswith(".json") or os.sep in text or Path(text).is_file()


def profile_file(name_or_path: str | os.PathLike) -> Path | None:
    """The file `load_profile(name_or_path)` reads: the path given, or the shipped profile's JSON in the package;
    None for a name no shipped profile has."""
    text = str(name_or_path)
    if _names_a_path(text):
        return Path(text)
    entry = _builtin_dir() / f"{text}.json"
    return Path(str(entry)) if entry.is_file() else None


def load_profile(name_or_path: str | os.PathLike) -> HardwareProfile:
    """Load a shipped profile by name (`h200`) or any profile JSON by path."""
    text = str(name_or_path)
    if _names_a_path(text):
        path = check_input(text, folder=True)  # a pipe or device: never opened (it would block)
        if path.is_dir():
            raise ProfileError(f"{path}: is a folder, not a profile JSON file")
        if not path.is_file():
            raise ProfileError(f"{path}: no such profile file")
        origin, raw = str(path), read_text(path)
    else:
        entry = _builtin_dir() / f"{text}.json"
        if not entry.is_file():
            raise ProfileError(f"unknown GPU profile {text!r}; shipped profiles: {', '.join(list_profiles())}")
        origin, raw = f"hwprofiles/{text}.json", entry.read_text()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{origin}: not valid JSON ({exc})") from exc
    return profile_from_dict(data, origin)


def save_profile(profile: HardwareProfile, path: str | os.PathLike) -> None:
    """Write `profile` as JSON whole or not at all (rooftune/outputs.py: OutputError where it cannot be)."""
    write_atomic(path, json.dumps(profile_to_dict(profile), indent=2) + "\n")
