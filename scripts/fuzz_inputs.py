"""A fuzz pass of bad inputs, as a new user gives them, over every command and the PyTorch ops (issue 57):
`python scripts/fuzz_inputs.py [--log FILE]`.

Each case is one bad input (or a good one beside it, as a control) run through the CLI in-process (typer's
CliRunner) or through `rooftune.matmul`, `.linear` and `.attention` on CPU tensors in Triton's interpreter, and
classified:
- clean: refused with a one-line `error:` message and a nonzero exit (the ops: an exception of rooftune's own
  types), or, where the case expects one, warned about and carried on with a plausible result;
- traceback: any other exception (the CLI's traceback; the ops' error of another type);
- silent: a bad input taken without a word, a warning missing, or a result that is implausible (NaN, an infinity,
  a negative or absurd TFLOP/s) or, for the ops, not the product torch computes.
Exit status 1 where any case is a traceback or silent. The committed log is scripts/fuzz_inputs.log
(`python scripts/fuzz_inputs.py --log scripts/fuzz_inputs.log`; its files are under $WORK, a temporary folder, and
the repository is $REPO).
`--only WORD` runs the categories whose name holds WORD (tests/scripts/test_fuzz_inputs.py runs one quickly, and all
of them among the slow tests).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton: the ops run on CPU tensors
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from unittest import mock  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from rooftune.candidates import GemmShape, Trial, kernel_of, legal_configs  # noqa: E402
from rooftune.eval.datasets.format import read_shape_text, shape_files  # noqa: E402
from rooftune.hwprofiles import load_profile, profile_to_dict  # noqa: E402
from rooftune.hwprofiles.profile import PLAUSIBLE_FLOOR  # noqa: E402
from rooftune.tuner.cache import TuneCache, tune_key  # noqa: E402
from rooftune.tuner.cli.app import app  # noqa: E402
from rooftune.tuner.residual_choice import shipped_residual  # noqa: E402
from rooftune.tuner.tune import TuneResult  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HELDOUT = REPO / "datasets" / "h200" / "gemm" / "heldout"
SHIPPED_GEMM = REPO / "hwprofiles" / "residuals" / "triton-3.6" / "gemm-NVIDIA_H200.json"
# What an output a command printed may not hold: NaN, an infinity, a negative or absurd rate, a 12-digit number.
IMPLAUSIBLE = re.compile(r"\bnan\b|\binf\b|-\d[\d,.]* TFLOP/s|\d{12,}", re.IGNORECASE)
ENV_SETTINGS = ("ROOFTUNE_CACHE", "ROOFTUNE_PROFILE", "ROOFTUNE_TUNE", "ROOFTUNE_FALLBACK", "ROOFTUNE_KERNEL_ONLY",
                "XDG_CACHE_HOME")


@dataclass
class Case:
    """One input. `expect`: 'refuse' (an error), 'warn' (a warning, then anything clean), 'accept' (a good input:
    a plausible result or a clean error), 'fallback' (the ops: what torch's own op does)."""

    category: str
    name: str
    expect: str
    run: Callable[[], tuple]  # -> (outcome, detail)
    env: dict = field(default_factory=dict)


# --- the workspace: files the cases damage copies of --------------------------------------------------------------

class Workspace:
    def __init__(self, root: Path):
        self.root = root
        self.n = 0

    def path(self, name: str) -> Path:
        self.n += 1
        folder = self.root / f"c{self.n:04d}"
        folder.mkdir()
        return folder / name

    def dataset(self, change: Callable[[list[str]], list[str]] | None = None, manifest=None) -> Path:
        """A one-shape copy of the committed held-out GEMM data (its smallest file), its CSV lines changed by
        `change`, its manifest by `manifest(dict)`."""
        root = self.path("ds")
        (root / "shapes").mkdir(parents=True)
        data = json.loads((HELDOUT / "manifest.json").read_text())
        (root / "manifest.json").write_text(json.dumps(manifest(data) if manifest else data))
        source = min(shape_files(HELDOUT), key=lambda p: p.stat().st_size)
        target = root / "shapes" / source.name
        if change is None:
            shutil.copy(source, target)
        else:
            from rooftune.eval.datasets.format import compress_text

            lines = read_shape_text(source).rstrip("\n").split("\n")
            target.write_bytes(compress_text("\n".join(change(lines)) + "\n"))
        return root

    def profile(self, change: Callable[[dict], object]) -> Path:
        data = profile_to_dict(load_profile("h200"))
        changed = change(data)
        path = self.path("gpu.json")
        path.write_text(changed if isinstance(changed, str) else json.dumps(data))
        return path

    def residual(self) -> Path:
        path = self.path("r.json")
        shutil.copy(SHIPPED_GEMM, path)
        shutil.copy(SHIPPED_GEMM.with_name(f"neighbours-{SHIPPED_GEMM.name}"), path.with_name("neighbours-r.json"))
        return path


# --- running a case -------------------------------------------------------------------------------------------------

RUNNER = CliRunner()


def cli(args: list, env: dict | None = None) -> Callable[[], tuple]:
    """A CLI case: (exit code, output, warnings, exception)."""
    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = RUNNER.invoke(app, [str(a) for a in args], env={k: None for k in ENV_SETTINGS} | (env or {}))
        said = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]
        return "cli", (result.exit_code, result.output, said, result.exception)
    return run


def classify_cli(case: Case, detail) -> tuple[str, str]:
    code, output, said, exception = detail
    text = " ".join(output.split())
    if (exception is not None and not isinstance(exception, SystemExit)) or "Traceback" in output:
        return "traceback", f"{type(exception).__name__}: {exception}"
    refused = code != 0
    usage = code == 2 and "Usage:" in text and "Error" in text  # click's own refusal of an option's value
    if refused and "error:" not in text and not usage:
        return "silent", f"exit {code} without an error: line: {text[:200]}"
    if not refused and IMPLAUSIBLE.search(text):
        return "silent", f"implausible output: {IMPLAUSIBLE.search(text).group(0)!r}"
    if case.expect == "refuse" and not refused:
        return "silent", f"exit 0: {text[:160]}"
    if case.expect == "warn" and not said and "warning:" not in text:
        return "silent", f"no warning (exit {code}): {text[:160]}"
    first = next((line for line in output.splitlines()
                  if "error:" in line or "warning:" in line or "Invalid value" in line), "")
    return "clean", (f"exit {code}; " + (_brief(said[0]) + " | " if said else "") + first.strip()[:150])


def _brief(text: str) -> str:
    """A long message's start and end (a warning names the file and the key before why)."""
    return text if len(text) <= 170 else f"{text[:50]} ... {text[-110:]}"


def op_case(call: Callable[[], object], reference: Callable[[], object] | None = None) -> Callable[[], tuple]:
    """An ops case: call(), against reference() (torch's own op) where the case expects a result."""
    def run():
        from rooftune.tuner.pytorch.ops import clear_memo

        clear_memo()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out, error = call(), None
            except Exception as exc:  # classified below
                out, error = None, exc
        said = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]
        expected = None
        if reference is not None:
            try:
                expected = reference()
            except Exception as exc:  # torch's own op refuses it too
                expected = exc
        return "op", (out, error, said, expected)
    return run


def _close(out, expected) -> bool:
    """`out` is torch's `expected` to fp16 rounding: NaN and infinities where torch's own op has them (a fallback
    runs torch's op, whatever it gives), never elsewhere."""
    import torch

    if not isinstance(out, torch.Tensor) or out.shape != expected.shape:
        return False
    return torch.allclose(out.float(), expected.float(), rtol=2e-2, atol=2e-2, equal_nan=True)


def classify_op(case: Case, detail) -> tuple[str, str]:
    out, error, said, expected = detail
    if error is not None:
        own = type(error).__module__.startswith("rooftune.")
        if case.expect == "fallback" and isinstance(expected, Exception):
            same = type(error) is type(expected)
            return ("clean" if same else "traceback"), f"{type(error).__name__} (torch's op: {type(expected).__name__})"
        if not own:
            return "traceback", f"{type(error).__name__}: {str(error)[:200]}"
        if case.expect in ("fallback", "warn") or (case.expect == "accept" and not isinstance(error, ValueError)):
            return "silent", f"raised {type(error).__name__} where a result was due: {str(error)[:160]}"
        return "clean", f"{type(error).__name__}: {str(error)[:200]}"
    if case.expect == "refuse":
        return "silent", "returned a result"
    if expected is not None and not isinstance(expected, Exception) and not _close(out, expected):
        return "silent", "a result that is not torch's"
    if case.expect == "warn" and not said:
        return "silent", "no warning"
    return "clean", "result as torch's" + (f"; warned: {_brief(said[0])}" if said else "")


def run_case(case: Case) -> tuple[str, str]:
    try:
        kind, detail = case.run()
    except Exception as exc:  # the harness itself: counted as a traceback, never hidden
        return "traceback", f"harness: {type(exc).__name__}: {exc}"
    return (classify_cli if kind == "cli" else classify_op)(case, detail)


# --- the cases ------------------------------------------------------------------------------------------------------

def cache_cases(ws: Workspace) -> list[Case]:
    """Damaged tune cache entries, served to `tune gemm` and to the ops; damaged cache files."""
    profile = load_profile("h200")
    cases = []
    for target in ("cli", "op"):
        shape = GemmShape(512, 512, 512) if target == "cli" else GemmShape(32, 48, 64, dtype="fp16")
        spec = kernel_of(shape)
        residual = None if target == "cli" else shipped_residual(spec, profile)
        key = tune_key(shape, profile, 20, residual)
        legal = legal_configs(spec.space, shape, profile).configs
        winner = legal[0]
        good = TuneResult(shape, winner, 30.0, (Trial(winner, 30.0), Trial(legal[1], 31.0)), "rooftune", profile.name,
                          spec.space.version, baseline_us=40.0, kernel="gemm")
        scratch = ws.path("tune.json")
        TuneCache(scratch).put(key, good)
        entry = json.loads(scratch.read_text())["entries"][key]
        w = entry["winner"]
        other = ws.path("other.json")
        o_shape = GemmShape(7, 512, 512) if target == "cli" else GemmShape(8, 48, 64, dtype="fp16")
        o_legal = legal_configs(spec.space, o_shape, profile).configs
        TuneCache(other).put("k", TuneResult(o_shape, o_legal[0], 5.0, (Trial(o_legal[0], 5.0),), "rooftune",
                                             profile.name, spec.space.version, kernel="gemm"))
        damage = {
            "winner BLOCK_M=17": {**entry, "winner": re.sub(r"BLOCK_M=\d+", "BLOCK_M=17", w)},
            "winner BLOCK_M=-64": {**entry, "winner": re.sub(r"BLOCK_M=\d+", "BLOCK_M=-64", w)},
            "winner missing BLOCK_K": {**entry, "winner": re.sub(r"BLOCK_K=\d+,", "", w)},
            "winner with an extra parameter": {**entry, "winner": w + ",EXTRA=1"},
            "winner not a string": {**entry, "winner": 64},
            "winner empty": {**entry, "winner": ""},
            "time NaN": {**entry, "time_us": math.nan},
            "time -2.5": {**entry, "time_us": -2.5},
            "time 0": {**entry, "time_us": 0},
            "time 1e-308": {**entry, "time_us": 1e-308},
            "time inf": {**entry, "time_us": math.inf},
            "time a string": {**entry, "time_us": "12.5"},
            "time null": {**entry, "time_us": None},
            "time true": {**entry, "time_us": True},
            "baseline -3": {**entry, "baseline_us": -3.0},
            "baseline NaN": {**entry, "baseline_us": math.nan},
            "baseline a string": {**entry, "baseline_us": "fast"},
            "entry a list": [entry],
            "entry a string": "entry",
            "entry a number": 7,
            "entry empty": {},
            "another shape": next(iter(json.loads(other.read_text())["entries"].values())),
            "another space version": {**entry, "space_version": "gemm-000000000000"},
            "shape m 0": {**entry, "shape": {**entry["shape"], "m": 0}},
            "shape with an unknown field": {**entry, "shape": {**entry["shape"], "q": 1}},
            "shape a list": {**entry, "shape": [1, 2, 3]},
            "kernel unknown": {**entry, "kernel": "conv"},
            "trials empty": {**entry, "trials": []},
            "trials null": {**entry, "trials": None},
            "trial time and error": {**entry, "trials": [{**entry["trials"][0], "error": "x"}] + entry["trials"][1:]},
            "trial time negative": {**entry, "trials": [{**entry["trials"][0], "time_us": -1}] + entry["trials"][1:]},
            "trial config outside": {**entry, "trials": [{**entry["trials"][0], "config": "BLOCK_M=17"}]},
            "trial a list": {**entry, "trials": [[1, 2]]},
            "winner not among the trials": {**entry, "trials": entry["trials"][1:]},
            "field missing": {k: v for k, v in entry.items() if k != "strategy"},
            "field unknown": {**entry, "cached": True},
            "phases a list": {**entry, "phases_s": [1, 2]},
        }
        for name, bad in damage.items():
            path = ws.path("tune.json")
            path.write_text(json.dumps({"format": "rooftune-tune-cache-2", "entries": {key: bad}}))
            cases.append(_cache_case(target, f"{name}", path, shape, "warn"))
        path = ws.path("tune.json")
        path.write_text(json.dumps({"format": "rooftune-tune-cache-2", "entries": {key: entry}}))
        cases.append(_cache_case(target, "a good entry (control)", path, shape, "accept"))
        for name, text in {"not JSON": "{oops", "another format": '{"format": "x", "entries": {}}',
                           "entries a list": '{"format": "rooftune-tune-cache-2", "entries": []}',
                           "a JSON list": "[]", "binary": None, "empty file": ""}.items():
            path = ws.path("tune.json")
            if text is None:
                path.write_bytes(bytes(range(256)))
            else:
                path.write_text(text)
            cases.append(_cache_case(target, f"cache file {name}", path, shape, "refuse"))
        folder = ws.path("folder")
        folder.mkdir()
        cases.append(_cache_case(target, "cache path a folder", folder, shape, "refuse"))
    return cases


def _cache_case(target: str, name: str, path: Path, shape, expect: str) -> Case:
    if target == "cli":
        return Case("tune cache (CLI)", name, expect, cli(["tune", "gemm", "--shape", "512x512x512", "--gpu", "h200",
                                                           "--residual", "none", "--cache", path]))
    env = {"ROOFTUNE_CACHE": str(path), "ROOFTUNE_KERNEL_ONLY": "1"}
    return Case("tune cache (ops)", name, "warn" if expect == "warn" else expect,
                _with_env(env, *_matmul(shape.m, shape.n, shape.k)), env)


def _with_env(env: dict, call, reference):
    def with_env():
        with mock.patch.dict(os.environ, env):  # the whole environment as it was, after
            for name in set(ENV_SETTINGS) - set(env):
                os.environ.pop(name, None)
            return call()
    return op_case(with_env, reference)


def _tensors(*shape, dtype="float16", seed=0):
    import torch

    gen = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(shape, generator=gen, dtype=getattr(torch, dtype))


def _matmul(m, n, k):
    import torch

    import rooftune

    a, b = _tensors(m, k), _tensors(k, n, seed=1)
    return (lambda: rooftune.matmul(a, b)), (lambda: torch.matmul(a.float(), b.float()))


PROFILE_VALUES = {"zero": 0, "negative": -1, "1e-300": 1e-300, "5e-324": 5e-324, "1e300": 1e300, "text": "fast",
                  "true": True, "null": None, "half the floor": "FLOOR/2", "a list": [1]}


def profile_cases(ws: Workspace) -> list[Case]:
    cases = []
    for field_name, floor in PLAUSIBLE_FLOOR.items():
        for label, value in PROFILE_VALUES.items():
            given = floor / 2 if value == "FLOOR/2" else value
            if isinstance(floor, int) and value == "FLOOR/2":
                given = max(0, floor // 2) if floor > 1 else 0
            path = ws.profile(lambda d, f=field_name, v=given: d.update({f: v}))
            cases.append(Case("profiles", f"{field_name} {label}", "refuse",
                              cli(["explain", "gemm", "--shape", "1024x1024x1024", "--gpu", path])))
    at_floor = ws.profile(lambda d: d.update({k: v for k, v in PLAUSIBLE_FLOOR.items()}))
    cases.append(Case("profiles", "every field at its floor", "accept",
                      cli(["explain", "gemm", "--shape", "1024x1024x1024", "--gpu", at_floor])))
    slow = ws.profile(lambda d: d.update({k: v for k, v in PLAUSIBLE_FLOOR.items() if isinstance(v, float)}))
    for kernel, shape in (("gemm", "1024x1024x1024"), ("attention", "1x8x1024x64"), ("moe", "8x2x1024x512x16")):
        cases.append(Case("profiles", f"every rate at its floor, {kernel}", "accept",
                          cli(["explain", kernel, "--shape", shape, "--gpu", slow])))
    for threads in (32, 64, 128, 256):
        path = ws.profile(lambda d, t=threads: d.update(max_threads_per_sm=t))
        for kernel, shape in (("gemm", "1024x1024x1024"), ("attention", "1x8x1024x64")):
            cases.append(Case("profiles", f"max_threads_per_sm {threads}, {kernel}", "accept",
                              cli(["explain", kernel, "--shape", shape, "--gpu", path])))
    structural = {
        "missing l2_bytes": lambda d: d.pop("l2_bytes"),
        "unknown field": lambda d: d.update(turbo=1),
        "compute capability [9]": lambda d: d.update(compute_capability=[9]),
        "compute capability strings": lambda d: d.update(compute_capability=["9", "0"]),
        "smem per block over per SM": lambda d: d.update(smem_per_block_bytes=d["smem_per_sm_bytes"] + 1),
        "name empty": lambda d: d.update(name=""),
        "sources a list": lambda d: d.update(sources=[]),
        "a JSON list": lambda d: "[1, 2]",
        "not JSON": lambda d: "{",
        "Infinity": lambda d: json.dumps({**d, "bf16_tflops": "@"}).replace('"@"', "Infinity"),
        "NaN": lambda d: json.dumps({**d, "dram_bw_gbps": "@"}).replace('"@"', "NaN"),
    }
    for name, change in structural.items():
        path = ws.profile(change)
        cases.append(Case("profiles", name, "refuse", cli(["explain", "gemm", "--shape", "64x64x64", "--gpu", path])))
    for name, value in {"unknown name": "h900", "missing file": "/nonexistent/p.json", "a folder": str(REPO)}.items():
        cases.append(Case("profiles", f"--gpu {name}", "refuse", cli(["explain", "gemm", "--shape", "64x64x64",
                                                                      "--gpu", value])))
        env = {"ROOFTUNE_PROFILE": value, "ROOFTUNE_KERNEL_ONLY": "1"}
        cases.append(Case("profiles (ops)", f"ROOFTUNE_PROFILE {name}", "refuse", _with_env(env, *_matmul(16, 16, 16))))
    small = ws.profile(lambda d: d.update(max_threads_per_sm=64))
    env = {"ROOFTUNE_PROFILE": str(small), "ROOFTUNE_KERNEL_ONLY": "1"}
    cases.append(Case("profiles (ops)", "ROOFTUNE_PROFILE with no legal config", "refuse",
                      _with_env(env, *_matmul(16, 16, 16))))
    return cases


def _edit_row(add: bool = False, **cells: str):
    """A dataset change: the first data row's `cells` (column -> text) set, or with `add` a copy of it so changed
    appended."""
    def change(lines: list[str]) -> list[str]:
        columns, row = lines[1].split(","), lines[2].split(",")
        for column, value in cells.items():
            row[columns.index(column)] = value
        return [*lines, ",".join(row)] if add else [*lines[:2], ",".join(row), *lines[3:]]
    return change


def dataset_cases(ws: Workspace) -> list[Case]:
    changes = {
        "a row of BLOCK_M=17 at 0.5 µs": ("warn", _edit_row(True, BLOCK_M="17", time_us="0.5")),
        "a row of num_warps=3": ("warn", _edit_row(True, num_warps="3")),
        "a row of SPLIT_K=0": ("warn", _edit_row(True, SPLIT_K="0")),
        "a row of BLOCK_N=-64": ("warn", _edit_row(True, BLOCK_N="-64")),
        "a baseline row of BLOCK_M=17": ("accept", _edit_row(True, BLOCK_M="17", in_space="0")),
        "time 1e-308": ("refuse", _edit_row(time_us="1e-308")),
        "time 5e-324": ("refuse", _edit_row(time_us="5e-324")),
        "time 0.01": ("refuse", _edit_row(time_us="0.01")),
        "time 0": ("refuse", _edit_row(time_us="0")),
        "time -1": ("refuse", _edit_row(time_us="-1")),
        "time nan": ("refuse", _edit_row(time_us="nan")),
        "time inf": ("refuse", _edit_row(time_us="inf")),
        "time text": ("refuse", _edit_row(time_us="fast")),
        "retime 1e-9": ("refuse", _edit_row(retime_us="1e-9")),
        "in_space 2": ("accept", _edit_row(in_space="2")),
        "a config value that is text": ("refuse", _edit_row(BLOCK_M="big")),
        "a row cut short": ("refuse", lambda ls: [*ls, "64,64"]),
        "a row with an extra cell": ("refuse", lambda ls: [*ls, ls[2] + ",1"]),
        "the header line not JSON": ("refuse", lambda ls: ["# rooftune-shape {", *ls[1:]]),
        "no header line": ("refuse", lambda ls: ls[1:]),
        "a baseline of 1e-300": ("refuse", lambda ls: [ls[0].replace('"baselines_us": {',
                                                                      '"baselines_us": {"x": 1e-300, ', 1), *ls[1:]]),
        "no time_us column": ("refuse", lambda ls: [ls[0], ls[1].replace("time_us", "time_ms"), *ls[2:]]),
        "only the header": ("accept", lambda ls: ls[:2]),
    }
    manifests = {
        "manifest format unknown": lambda d: {**d, "format": "x"},
        "manifest kernel attention": lambda d: {**d, "kernel": "attention"},
        "manifest space_version a number": lambda d: {**d, "space_version": 3},
        "manifest device a list": lambda d: {**d, "device": []},
        "manifest triton a number": lambda d: {**d, "device": {**(d.get("device") or {}), "triton": 3.6}},
        "manifest gpu_profile unknown": lambda d: {**d, "gpu_profile": "RTX 9090"},
    }
    cases = []
    commands = {"eval": ["eval", "gemm", "--budget", "2", "--methods", "model", "--data"],
                "report": ["report", "gemm", "--data"]}
    for name, (expect, change) in changes.items():
        root = ws.dataset(change)
        for command, args in commands.items():
            cases.append(Case("datasets", f"{command}: {name}", expect, cli([*args, root])))
    for name, change in manifests.items():
        root = ws.dataset(manifest=change)
        for command, args in commands.items():
            expect = "accept" if "gpu_profile" in name else "refuse"
            cases.append(Case("datasets", f"{command}: {name}", expect, cli([*args, root])))
    return cases


PROBE_HEADS = {"gemm": "M,N,K,BM,BN,BK,stages,warps,GM,us,err", "attention": "B,H,S,D,BM,BN,stages,warps,rev,us,err"}
PROBE_GOOD = {"gemm": "64,64,64,64,64,32,3,4,1,9.0,", "attention": "1,8,256,64,64,64,3,4,1,40.0,"}


def probe_cases(ws: Workspace) -> list[Case]:
    rows = {"a row of two cells": ("refuse", "64,64"), "a row of one cell": ("refuse", "1"),
            "a row with an extra cell": ("refuse", "{good},x"), "a time of nan": ("refuse", "{cut}nan,"),
            "a time of -2": ("refuse", "{cut}-2,"), "a time of 1e-308": ("refuse", "{cut}1e-308,"),
            "a time of text": ("refuse", "{cut}slow,"), "a size of text": ("refuse", "x,{rest}"),
            "an empty size": ("refuse", ",{rest}"), "a good row (control)": ("accept", "{good}")}
    cases = []
    for kernel in ("gemm", "attention"):
        good = PROBE_GOOD[kernel]
        cut = good.rsplit(",", 2)[0] + ","
        rest = good.split(",", 1)[1]
        for name, (expect, row) in rows.items():
            path = ws.path(f"{kernel}_probe.csv")
            path.write_text(f"{PROBE_HEADS[kernel]}\n{good}\n{row.format(good=good, cut=cut, rest=rest)}\n")
            cases.append(Case("probe CSVs", f"{kernel}: {name}", expect,
                              cli(["eval", kernel, "--data", path, "--budget", "1", "--methods", "model"])))
        path = ws.path(f"{kernel}_probe.csv")
        path.write_text(PROBE_HEADS[kernel].replace(",us", "") + "\n" + good + "\n")
        cases.append(Case("probe CSVs", f"{kernel}: a missing column", "refuse",
                          cli(["eval", kernel, "--data", path, "--budget", "1"])))
    return cases


def output_cases(ws: Workspace) -> list[Case]:
    """An output over an input (companions included), or two outputs on one path."""
    cases = []

    def training():
        return ws.dataset(manifest=lambda d: {**d, "shapes_file": "shapes_train.json"})

    def add(name, args):
        cases.append(Case("outputs", name, "refuse", cli(args)))

    data = ws.dataset()
    shape_file = next((data / "shapes").iterdir())
    residual = ws.residual()
    table = residual.with_name("neighbours-r.json")
    profile = ws.profile(lambda d: None)
    cache = ws.path("tune.json")
    cache.write_text('{"format": "rooftune-tune-cache-2", "entries": {}}')
    evaluate = ["eval", "gemm", "--data", data, "--budget", "2", "--methods", "model"]
    add("eval --json onto the manifest", [*evaluate, "--json", data / "manifest.json"])
    add("eval --json onto a shape file", [*evaluate, "--json", shape_file])
    add("eval --json onto the --residual", [*evaluate, "--residual", residual, "--json", residual])
    add("eval --json onto the residual's neighbour table", [*evaluate, "--residual", residual, "--json", table])
    add("eval --json onto the --gpu profile", [*evaluate, "--gpu", profile, "--json", profile])
    add("eval --json and --plot one path", [*evaluate, "--json", data.parent / "x.png", "--plot",
                                            data.parent / "x.png"])
    add("eval --plot onto the residual's table", [*evaluate, "--residual", residual, "--plot", table])
    report = ["report", "gemm", "--data", data]
    add("report --json onto the manifest", [*report, "--json", data / "manifest.json"])
    add("report --markdown onto a shape file", [*report, "--markdown", shape_file])
    add("report --json and --markdown one path", [*report, "--json", data.parent / "x.md", "--markdown",
                                                  data.parent / "x.md"])
    add("report --markdown and --plot one path", [*report, "--markdown", data.parent / "y.png", "--plot",
                                                  data.parent / "y.png"])
    train = training()
    add("fit --out onto the manifest", ["fit", "gemm", "--data", train, "--out", train / "manifest.json"])
    add("fit --out onto the --gpu profile", ["fit", "gemm", "--data", train, "--gpu", profile, "--out", profile])
    add("fit --route --out onto the manifest", ["fit", "gemm", "--data", train, "--route", "--out",
                                                train / "manifest.json"])
    add("fit --route --out onto the --gpu profile", ["fit", "gemm", "--data", train, "--gpu", profile, "--route",
                                                     "--out", profile])
    add("fit --check --out onto the --gpu profile", ["fit", "gemm", "--data", train, "--gpu", profile, "--check",
                                                     residual, "--out", profile])
    add("fit --check --out onto the residual's table", ["fit", "gemm", "--data", train, "--check", residual, "--out",
                                                        table])
    add("fit --check --out onto the manifest", ["fit", "gemm", "--data", train, "--check", residual, "--out",
                                                train / "manifest.json"])
    add("tune --json onto the cache", ["tune", "gemm", "--shape", "64x64x64", "--cache", cache, "--json", cache])
    add("tune --json onto the --gpu profile", ["tune", "gemm", "--shape", "64x64x64", "--gpu", profile, "--json",
                                               profile])
    add("tune --json onto the residual's table", ["tune", "gemm", "--shape", "64x64x64", "--residual", residual,
                                                  "--json", table])
    add("explain --plot onto the --data manifest", ["explain", "gemm", "--shape", "64x64x64", "--data", data,
                                                    "--plot", data / "manifest.json"])
    return cases


def environment_cases(ws: Workspace) -> list[Case]:
    cases = []
    folder = ws.path("folder")
    folder.mkdir()
    caches = {"~nouser/x.json": "~nouser_of_rooftune/x.json", "a folder": str(folder), "/dev/null": "/dev/null"}
    for name, value in caches.items():
        env = {"ROOFTUNE_CACHE": value}
        cases.append(Case("environment", f"ROOFTUNE_CACHE {name} (tune)", "refuse",
                          cli(["tune", "gemm", "--shape", "64x64x64"], env)))
        env_ops = {**env, "ROOFTUNE_KERNEL_ONLY": "1"}
        cases.append(Case("environment", f"ROOFTUNE_CACHE {name} (ops)", "refuse",
                          _with_env(env_ops, *_matmul(16, 16, 16))))
    env = {"XDG_CACHE_HOME": "~nouser_of_rooftune"}
    cases.append(Case("environment", "XDG_CACHE_HOME ~nouser (tune)", "refuse",
                      cli(["tune", "gemm", "--shape", "64x64x64"], env)))
    for name in ("ROOFTUNE_TUNE", "ROOFTUNE_FALLBACK", "ROOFTUNE_KERNEL_ONLY"):
        for value in ("maybe", "2", "-1", "tru"):
            cases.append(Case("environment", f"{name}={value} (ops)", "refuse",
                              _with_env({name: value}, *_matmul(16, 16, 16))))
        cases.append(Case("environment", f"{name}=1 (ops, control)", "accept",
                          _with_env({name: "1", "ROOFTUNE_KERNEL_ONLY": "1"}, *_matmul(16, 16, 16))))
    cases.append(Case("environment", "ROOFTUNE_KERNEL_ONLY=maybe (explain)", "refuse",
                      cli(["explain", "gemm", "--shape", "64x64x64"], {"ROOFTUNE_KERNEL_ONLY": "maybe"})))
    return cases


def op_cases() -> list[Case]:
    import torch
    import torch.nn.functional as F

    import rooftune

    env = {"ROOFTUNE_KERNEL_ONLY": "1"}
    t = _tensors
    cases = []

    def add(name, expect, call, reference=None):
        cases.append(Case("ops", name, expect, _with_env(env, call, reference)))

    big_k = 2**23 + 1
    wide_a = torch.ones(1, 1, dtype=torch.float16).expand(2, big_k)
    wide_b = torch.ones(1, 1, dtype=torch.float16).expand(big_k, 3)
    q = t(1, 2, 16, 32)
    bad_gemms = {
        "fp32 operands": (t(8, 16, dtype="float32"), t(16, 8, dtype="float32")),
        "int operands": (torch.ones(8, 16, dtype=torch.int32), torch.ones(16, 8, dtype=torch.int32)),
        "mixed dtypes": (t(8, 16), t(16, 8, dtype="bfloat16")),
        "inner dimensions differ": (t(8, 16), t(15, 8)),
        "b 3-D": (t(8, 16), t(2, 16, 8)),
        "a 0-D": (torch.tensor(1.0, dtype=torch.float16), t(1, 8)),
        "M 0": (t(0, 16), t(16, 8)),
        "K over the size limit": (wide_a, wide_b),
        "fp64 operands": (t(8, 16, dtype="float64"), t(16, 8, dtype="float64")),
    }
    for name, (a, b) in bad_gemms.items():
        add(f"matmul {name}", "refuse", lambda a=a, b=b: rooftune.matmul(a, b))
        add(f"matmul {name}, fallback", "fallback", lambda a=a, b=b: rooftune.matmul(a, b, fallback=True),
            lambda a=a, b=b: torch.matmul(a, b))
        add(f"linear {name}", "refuse", lambda a=a, b=b: rooftune.linear(a, b.t() if b.dim() == 2 else b))
    add("matmul a list", "refuse", lambda: rooftune.matmul([[1.0]], t(1, 1)))
    add("matmul None", "refuse", lambda: rooftune.matmul(None, t(1, 1)))
    add("linear bias of the wrong size", "refuse", lambda: rooftune.linear(t(4, 16), t(8, 16), t(7)))
    add("linear bias a list", "refuse", lambda: rooftune.linear(t(4, 16), t(8, 16), [1.0] * 8))
    add("linear bias fp32", "refuse", lambda: rooftune.linear(t(4, 16), t(8, 16), t(8, dtype="float32")))
    add("linear bias of the wrong size, fallback", "fallback",
        lambda: rooftune.linear(t(4, 16), t(8, 16), t(7), fallback=True), lambda: F.linear(t(4, 16), t(8, 16), t(7)))
    add("matmul 16x16x16 (control)", "accept", lambda: rooftune.matmul(t(16, 16), t(16, 16, seed=1)),
        lambda: torch.matmul(t(16, 16).float(), t(16, 16, seed=1).float()))
    for value in (math.inf, -math.inf, math.nan, 0.0, -1.0):
        add(f"attention scale={value}", "refuse", lambda v=value: rooftune.attention(q, q, q, scale=v))
        add(f"attention scale={value}, fallback", "refuse" if not math.isfinite(value) else "fallback",
            lambda v=value: rooftune.attention(q, q, q, scale=v, fallback=True),
            None if not math.isfinite(value) else
            (lambda v=value: F.scaled_dot_product_attention(q, q, q, is_causal=True, scale=v)))
    add("attention scale a string", "refuse", lambda: rooftune.attention(q, q, q, scale="big"))
    bad_attention = {
        "head_dim 48": (t(1, 2, 16, 48),) * 3,
        "kv heads not dividing": (t(1, 3, 16, 32), t(1, 2, 16, 32), t(1, 2, 16, 32)),
        "sequence lengths differ": (t(1, 2, 16, 32), t(1, 2, 24, 32), t(1, 2, 24, 32)),
        "fp32": (t(1, 2, 16, 32, dtype="float32"),) * 3,
        "3-D": (t(2, 16, 32),) * 3,
        "empty batch": (t(0, 2, 16, 32),) * 3,
    }
    for name, (qq, kk, vv) in bad_attention.items():
        add(f"attention {name}", "refuse", lambda qq=qq, kk=kk, vv=vv: rooftune.attention(qq, kk, vv))
    add("attention 1x2x16x32 (control)", "accept", lambda: rooftune.attention(q, q, q),
        lambda: F.scaled_dot_product_attention(q.float(), q.float(), q.float(), is_causal=True))
    return cases


# Values the command line refuses, each in the place a user types it: a family's --shape, then other options.
BAD_SHAPES = {"gemm": ("0x1x1", "-1x2x3", "axbxc", "1x2", "1x2x3x4", "", "1.5x2x3", "64x64x99999999999"),
              "attention": ("1x8x1024x48", "1x0x1024x64", "1x8x1024", "1x3x1024x64x2"),
              "moe": ("8x16x1024x512x16", "0x2x1024x512x16", "8x2x1024x512")}
BAD_OPTIONS = {
    "explain gemm": (["explain", "gemm", "--shape", "64x64x64"], [
        ["--layout", "xy"], ["--dtype", "int8"], ["--top", "0"], ["--top", "-3"], ["--config", "junk"],
        ["--config", ""], ["--config", "BLOCK_M=17,num_warps=4,num_stages=3"]]),
    "explain moe": (["explain", "moe", "--shape", "8x2x1024x512x16"], [["--gemm", "sideways"]]),
    "explain moe-fp8": (["explain", "moe-fp8", "--shape", "8x2x1024x512x16"], [["--quant", "none"]]),
    "tune gemm": (["tune", "gemm", "--shape", "64x64x64"], [["--budget", "0"], ["--budget", "-5"], ["--sms", "0"],
                                                             ["--sms", "100000"]]),
    "tune moe": (["tune", "moe", "--experts", "8", "--topk", "2", "--hidden", "1024", "--intermediate", "512"],
                 [["--tp", "0"], ["--batch", "x"], ["--block-shape", "64,128"]]),
    "tune model": (["tune", "model", "--batch", "1"], [["--config", "gpt-9"], ["--config", "~nouser_of_rooftune/c"],
                                                        ["--config", "llama-3-8b", "--batch", "0"]]),
    "eval gemm": (["eval", "gemm", "--data", str(HELDOUT)], [["--budget", "0"], ["--budget", "2", "--methods", "x"]]),
    "eval gemm missing data": (["eval", "gemm", "--budget", "2"], [["--data", "/nonexistent"]]),
    "report": (["report"], [["gemm", "--data", "/nonexistent"], ["attention", "--data", str(HELDOUT)]]),
    "fit on held-out data": (["fit", "gemm", "--data", str(HELDOUT)], [["--out", "/tmp/never-written.json"]]),
    "sweep": (["sweep", "gemm", "--out", "/tmp/never"], [["--shapes", "/nonexistent.json"],
                                                          ["--shapes", "x.json", "--shard", "3/2"]]),
}


def cli_arg_cases() -> list[Case]:
    cases = [Case("arguments", f"{kernel} --shape {shape!r}", "refuse", cli(["explain", kernel, "--shape", shape]))
             for kernel, shapes in BAD_SHAPES.items() for shape in shapes]
    cases += [Case("arguments", f"{name} {' '.join(extra)}", "refuse", cli([*base, *extra]))
              for name, (base, extras) in BAD_OPTIONS.items() for extra in extras]
    cases += [Case("arguments", "space gemm --shape x", "refuse", cli(["space", "gemm", "--shape", "x"])),
              Case("arguments", "explain gemm 64x64x64 (control)", "accept",
                   cli(["explain", "gemm", "--shape", "64x64x64"]))]
    return cases


def encoding_cases() -> list[Case]:
    """The CLI on an ASCII terminal, as a subprocess (the encoding is the process's)."""
    env = {**os.environ, "LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}
    cases = []
    for args in (["explain", "gemm", "--shape", "1024x1024x1024"], ["explain", "attention", "--shape", "1x8x1024x64"],
                 ["space", "moe", "--shape", "8x2x1024x512x16"], ["hwprofiles"]):
        def run(args=args):
            done = subprocess.run([sys.executable, "-m", "rooftune.tuner.cli.app", *args], capture_output=True, env=env,
                                  timeout=300)
            output = (done.stdout + done.stderr).decode("ascii", "replace")
            exception = RuntimeError(output[-300:]) if "Traceback" in output else None
            return "cli", (done.returncode, output, [], exception)
        cases.append(Case("encoding", f"LANG=C PYTHONIOENCODING=ascii {' '.join(args[:2])}", "accept", run))
    return cases


def all_cases(ws: Workspace) -> list[Case]:
    return [*cache_cases(ws), *profile_cases(ws), *dataset_cases(ws), *probe_cases(ws), *output_cases(ws),
            *environment_cases(ws), *op_cases(), *cli_arg_cases(), *encoding_cases()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, help="also write the log to this file")
    parser.add_argument("--only", help="run only the categories whose name contains this")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    lines, counts = [], Counter()
    with tempfile.TemporaryDirectory(prefix="rooftune-fuzz-") as tmp:
        cases = [c for c in all_cases(Workspace(Path(tmp))) if not args.only or args.only in c.category]
        by_category: dict[str, Counter] = {}
        for case in cases:
            verdict, detail = run_case(case)
            counts[verdict] += 1
            by_category.setdefault(case.category, Counter())[verdict] += 1
            line = f"{verdict:9} [{case.category}] {case.name} (expect {case.expect}): {detail}"
            line = re.sub(r"\S*rooftune-fuzz-[^/\s]*", "$WORK", line.replace(str(REPO), "$REPO"))
            lines.append(" ".join(line.split()))  # the same log from every run, on any machine
            if verdict != "clean":
                print(lines[-1], flush=True)
    lines.append("")
    for category, c in by_category.items():
        lines.append(f"{category}: {sum(c.values())} cases, {c['clean']} clean, {c['traceback']} tracebacks, "
                     f"{c['silent']} silent")
    summary = (f"{sum(counts.values())} cases: {counts['clean']} clean, {counts['traceback']} tracebacks, "
               f"{counts['silent']} silent ({time.perf_counter() - start:.0f} s)")
    lines.append(summary)
    print("\n".join(lines[-len(by_category) - 1:]))
    if args.log:
        args.log.write_text("\n".join(lines) + "\n")
    return 1 if counts["traceback"] or counts["silent"] else 0


if __name__ == "__main__":
    sys.exit(main())
