"""The tune cache: a JSON file of tune results by key, shared by `rooftune tune`, `tune moe`, the PyTorch ops
and `rooftune.autotune` (its own file beside it, in the same form).

A key names everything that makes a stored tune stale: the GPU (its profile, with the SM partition), the shape,
the space's version, the kernel source's digest, the Triton version that compiled it (a new compiler can move
the configs' order), the tuner (strategy and residual digest) and the budget. A file is read whole and
written whole (rooftune/outputs.py `write_atomic`), re-read just before each write, as another process may
have written since. A file that cannot be read raises TuneCacheError.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import asdict, replace
from pathlib import Path

from rooftune.candidates import Trial, kernel_of, kernel_spec, parse_config, shape_id
from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.outputs import file_digest, write_atomic
from rooftune.roofline.neighbours import table_to_dict
from rooftune.roofline.residual import residual_to_dict
from rooftune.tuner.tune import TuneResult

CACHE_FORMAT = "rooftune-tune-cache-2"
CACHE_ENV = "ROOFTUNE_CACHE"


class TuneCacheError(ValueError):
    """A tune cache file that cannot be read."""


def cache_path() -> Path:
    """The per-user tune cache that `rooftune tune` and the PyTorch ops share: $ROOFTUNE_CACHE, else
    tune.json under $XDG_CACHE_HOME/rooftune (default ~/.cache/rooftune)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rooftune" / "tune.json"


# --- keys ----------------------------------------------------------------------------------------------

def kernel_digest(module: str = "rooftune.kernels.gemm") -> str:
    """Digest of a kernel's source, found without importing it (that would import torch and triton)."""
    return file_digest(importlib.util.find_spec(module).origin)


def residual_digest(residual) -> str:
    """Digest of what in `residual` moves a ranking (its features, coefficients, pick and search constants),
    not of its record of how it was fitted: a check under another Triton keeps the cached tunes."""
    if residual is None:
        return "model-only"
    ranking = {k: v for k, v in residual_to_dict(residual).items() if k != "fit"}
    if residual.neighbours is not None:  # the vote moves the ranking too: its table, less its record of the fit
        ranking["neighbours"] = {k: v for k, v in table_to_dict(residual.neighbours).items() if k != "fit"}
    return hashlib.sha256(json.dumps(ranking, sort_keys=True).encode()).hexdigest()[:12]


def cache_key(shape, profile: HardwareProfile, budget: int, sms: int | None = None, *, tuner: str,
              triton: str | None = None) -> str:
    """The key of a tune of `shape` by `tuner` (a strategy's name and what it ranks with) within `budget`
    configs, compiled by Triton `triton` (None: the installed one), on `profile`'s GPU (an SM partition of
    it with `sms`), over the shape's kernel's space and source as they are now."""
    spec = kernel_of(shape)
    gpu = profile.name if sms is None else f"{profile.name} ({sms} SMs)"
    triton = triton or installed_triton()
    return "|".join((gpu, shape_id(shape), spec.space.version, kernel_digest(spec.module),
                     f"triton={triton or 'none'}", tuner, f"budget={budget}"))


def tune_key(shape, profile: HardwareProfile, budget: int, residual, sms: int | None = None,
             triton: str | None = None) -> str:
    """The key under which `tune_shape` stores a `rooftune`-strategy tune of `shape` over `residual`
    compiled by Triton `triton` (None: the installed one)."""
    return cache_key(shape, profile, budget, sms, tuner=f"rooftune:{residual_digest(residual)}", triton=triton)


# --- files ---------------------------------------------------------------------------------------------

class CacheFile:
    """A JSON file {"format": `fmt`, "entries": {key: entry}}; `kind` names it in errors ("tune", "autotune")."""

    def __init__(self, path: str | Path, fmt: str, kind: str):
        self.path, self.fmt, self.kind = Path(path), fmt, kind

    def read(self) -> dict:
        """The whole file (empty where there is none). Raises TuneCacheError."""
        path, fmt, kind = self.path, self.fmt, self.kind
        if not path.exists():
            return {"format": fmt, "entries": {}}
        if not path.is_file():  # a device such as /dev/full would be read forever
            raise TuneCacheError(f"{path}: not a regular file, so not a rooftune {kind} cache; pass a file path "
                                 f"(${CACHE_ENV} or --cache)")
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TuneCacheError(f"{path}: not a readable rooftune {kind} cache ({exc}); delete it or pass "
                                 f"another --cache") from exc
        if not isinstance(data, dict) or data.get("format") != fmt or not isinstance(data.get("entries"), dict):
            raise TuneCacheError(f"{path}: not a rooftune {kind} cache (expected format {fmt!r}); delete it "
                                 f"or pass another --cache")
        return data

    def entry(self, key: str) -> dict | None:
        return self.read()["entries"].get(key)

    def put_entry(self, key: str, entry: dict) -> None:
        """Store `entry` under `key`, the file re-read first. Raises TuneCacheError, OutputError."""
        data = self.read()
        data["entries"][key] = entry
        write_atomic(self.path, (json.dumps(data, indent=1) + "\n").encode())


class TuneCache(CacheFile):
    """The tune cache at `path` (default `cache_path()`): `get(key)` a stored TuneResult (marked `cached`) or
    None, `put(key, result)`."""

    def __init__(self, path: str | Path | None = None):
        super().__init__(cache_path() if path is None else path, CACHE_FORMAT, "tune")

    def get(self, key: str) -> TuneResult | None:
        stored = self.entry(key)
        if stored is None:
            return None
        try:
            return replace(result_from_dict(stored), cached=True)
        except (KeyError, TypeError, ValueError) as exc:
            raise TuneCacheError(f"{self.path}: entry {key!r} is malformed ({exc}); delete the file") from exc

    def put(self, key: str, result: TuneResult) -> None:
        """Raises TuneCacheError (an unreadable file), OutputError (one that cannot be written)."""
        self.put_entry(key, result_to_dict(result))


def result_to_dict(result: TuneResult) -> dict:
    """A JSON-ready form of `result` (configs in their string form); `result_from_dict` reads it back."""
    d = asdict(result)
    d["shape"] = asdict(result.shape)
    d["winner"] = str(result.winner)
    d["trials"] = [{**asdict(t), "config": str(t.config)} for t in result.trials]
    d.pop("cached")
    d.pop("cache_error")
    return d


def result_from_dict(d: dict) -> TuneResult:
    shape_type = kernel_spec(d.get("kernel", "gemm")).shape_type
    return TuneResult(**{**d, "shape": shape_type(**d["shape"]), "winner": parse_config(d["winner"]),
                         "trials": tuple(Trial(**{**t, "config": parse_config(t["config"])}) for t in d["trials"])})
