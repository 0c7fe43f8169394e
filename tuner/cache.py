"""The tune cache: a JSON file of tune results by key, shared by `rooftune tune`, `tune moe`, the PyTorch ops
and `rooftune.autotune` (its own file beside it, in the same form).

A key names everything that makes a stored tune stale: the GPU (its profile, with the SM partition), the shape,
the space's version, the kernel source's digest, the Triton version that compiled it (a new compiler can move
the configs' order), the tuner (strategy and residual digest) and the budget.

Many processes share one file: the eight tensor-parallel ranks of a server, or several workers, each tuning on
first use (ROOFTUNE_TUNE=1) into the same ~/.cache/rooftune/tune.json. A store is a read-modify-write under a file
lock (rooftune/outputs.py `file_lock`: an exclusive flock on `.tune.json.lock` beside the file), so no writer loses
another's entries; the write itself is atomic (`write_atomic`), so a reader, which takes no lock, sees the file
before or after a store, never part of one. A lock rather than one file per entry or a database: the cache stays
one JSON file that `rooftune tune --cache`, the scripts and a user read whole, and flock is in the standard library
and released by the kernel when its holder dies, so a killed worker leaves no stale lock. A store waits at most
LOCK_TIMEOUT_S for the lock (a hung holder), then fails as a full disk does: the result stands, unkept.

No entry is trusted: another rooftune version, a hand edit or another program may have written it. Each is checked
as it is read (`result_from_dict`: every field of its type, the winner a point of its space, the times real ones,
the shape and space the key's); one that fails is ignored, with one `CacheEntryWarning` naming the file and the key,
as if it were not there: never served, never a traceback, and tuned again where tuning is on (the new result
replaces it). A file that cannot be read at all (not JSON, not a cache) raises TuneCacheError.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import TypeVar

from rooftune.candidates import Trial, check_in_grid, kernel_of, kernel_spec, parse_config, shape_id
from rooftune.candidates.records import check_time_us
from rooftune.environment import env_path, home_folder
from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.outputs import file_digest, file_lock, write_atomic
from rooftune.roofline.neighbours import table_to_dict
from rooftune.roofline.residual import residual_to_dict
from rooftune.tuner.tune import TuneResult

CACHE_FORMAT = "rooftune-tune-cache-2"
CACHE_ENV = "ROOFTUNE_CACHE"
# The longest a store waits for the lock (another store holds it for milliseconds) before it gives up: a hung holder.
LOCK_TIMEOUT_S = 60.0
Entry = TypeVar("Entry")


class TuneCacheError(ValueError):
    """A tune cache file that cannot be read."""


class CacheEntryWarning(UserWarning):
    """A cache entry that failed its check, ignored (as if absent)."""


def cache_path() -> Path:
    """The per-user tune cache that `rooftune tune` and the PyTorch ops share: $ROOFTUNE_CACHE, else
    tune.json under $XDG_CACHE_HOME/rooftune (default ~/.cache/rooftune). SettingError (rooftune/environment.py)
    naming the variable where a `~user` in it, or the default's home, cannot be found."""
    given = env_path(CACHE_ENV)
    if given is not None:
        return given
    base = env_path("XDG_CACHE_HOME") or home_folder(f"the tune cache (${CACHE_ENV} names one)") / ".cache"
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


KEY_FIELDS = 7  # cache_key's: GPU, shape, space version, kernel digest, Triton, tuner, budget


def tune_key(shape, profile: HardwareProfile, budget: int, residual, sms: int | None = None,
             triton: str | None = None) -> str:
    """The key under which `tune_shape` stores a `rooftune`-strategy tune of `shape` over `residual`
    compiled by Triton `triton` (None: the installed one)."""
    return cache_key(shape, profile, budget, sms, tuner=f"rooftune:{residual_digest(residual)}", triton=triton)


# --- files ---------------------------------------------------------------------------------------------

class CacheFile:
    """A JSON file {"format": `fmt`, "entries": {key: entry}}; `kind` names it in errors ("tune", "autotune").
    Stores are locked against each other, reads see whole files (module docstring)."""

    def __init__(self, path: str | Path, fmt: str, kind: str):
        self.path, self.fmt, self.kind = Path(path), fmt, kind

    @property
    def lock_path(self) -> Path:
        """The lock file of the stores: `.NAME.lock` beside the file (where a link leads: the file it names)."""
        target = self.path.resolve() if self.path.is_symlink() else self.path
        return target.with_name(f".{target.name}.lock")

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

    def entry(self, key: str, check: Callable[[str, object], Entry]) -> Entry | None:
        """The entry under `key` as `check(key, entry)` makes it, which raises ValueError, TypeError or KeyError
        saying what is wrong with it; None where there is none, or where `check` refuses it: then with one
        CacheEntryWarning naming the file, the key and why (module docstring)."""
        entries = self.read()["entries"]
        if key not in entries:
            return None
        try:
            return check(key, entries[key])
        except (ValueError, TypeError, KeyError) as exc:
            why = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            warnings.warn(f"{self.path}: {self.kind} cache entry {key!r} ignored, as if absent ({why})",
                          CacheEntryWarning, stacklevel=3)
            return None

    def put_entry(self, key: str, entry: dict) -> None:
        """Store `entry` under `key`: the file read and written under its lock (module docstring), so a store by
        another process in between is kept. Raises TuneCacheError, OutputError."""
        with file_lock(self.lock_path, LOCK_TIMEOUT_S, f"the {self.kind} cache {self.path}"):
            data = self.read()
            data["entries"][key] = entry
            write_atomic(self.path, (json.dumps(data, indent=1) + "\n").encode())


class TuneCache(CacheFile):
    """The tune cache at `path` (default `cache_path()`): `get(key)` a stored TuneResult (marked `cached`) or
    None, `put(key, result)`."""

    def __init__(self, path: str | Path | None = None):
        super().__init__(cache_path() if path is None else path, CACHE_FORMAT, "tune")

    def get(self, key: str) -> TuneResult | None:
        """The result stored under `key`, None where there is none or it fails its check (`keyed_result`)."""
        return self.entry(key, keyed_result)

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


# --- reading an entry back: nothing in it trusted ------------------------------------------------------------

_STORED = tuple(f.name for f in fields(TuneResult) if f.name not in ("cached", "cache_error"))
_REQUIRED = ("shape", "winner", "time_us", "trials", "strategy", "profile", "space_version")
_TEXTS = {"strategy": False, "profile": False, "space_version": False, "kernel": False, "triton": True,
          "residual_note": True}  # field -> whether null is allowed
_TRIAL_TIMES = ("time_us", "screen_us", "retime_us", "retime2_us", "predicted_us")
_TRIAL_FIGURES = ("compile_s", "spread")


def _object(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _figure(value, what: str, least: float | None = 0.0) -> float:
    """A real number, finite and at least `least` (None: any; seconds, a spread)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or (least is not None and value < least):
        raise ValueError(f"{what} = {value!r} is not a finite number" + (f" >= {least:g}" if least is not None else ""))
    return float(value)


def _count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} = {value!r} is not a count")
    return value


def space_config(spec, text, what: str):
    """The config `text` names, a point of `spec`'s space with every parameter (ConfigError, a ValueError, where not:
    the ops would run it, and Triton crash on it)."""
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a config string, got {type(text).__name__}")
    config = parse_config(text)
    check_in_grid(spec.space, config)
    return config


def _trial(spec, t, number: int) -> Trial:
    what = f"trial {number}"
    t = _object(t, what)
    unknown = set(t) - {f.name for f in fields(Trial)}
    if unknown:
        raise ValueError(f"{what} has unknown field(s) {', '.join(sorted(unknown))}")
    values = {**t, "config": space_config(spec, t.get("config"), f"{what}'s config")}
    for name in _TRIAL_TIMES:
        if values.get(name) is not None:
            values[name] = check_time_us(values[name], f"{what}'s {name}")
    for name in _TRIAL_FIGURES:
        if values.get(name) is not None:
            values[name] = _figure(values[name], f"{what}'s {name}")
    for name in ("rounds", "retime_rounds"):
        if values.get(name) is not None:
            values[name] = _count(values[name], f"{what}'s {name}")
    if values.get("error") is not None and not isinstance(values["error"], str):
        raise ValueError(f"{what}'s error must be text, got {values['error']!r}")
    if not isinstance(values.get("in_space", True), bool):
        raise ValueError(f"{what}'s in_space must be true or false, got {values['in_space']!r}")
    return Trial(**values)  # ValueError where it has both a time and an error, or neither


def result_from_dict(d) -> TuneResult:
    """The TuneResult a stored entry holds, every field checked: a ValueError (TypeError, KeyError) saying what is
    wrong where it is not an object of TuneResult's fields (those `result_to_dict` writes), its kernel one rooftune
    has, its shape one of that kernel's, its winner a point of the kernel's space with every parameter and among
    its trials, its times real ones (`check_time_us`: finite, at least MIN_TIME_US), its texts texts."""
    d = _object(d, "an entry")
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    unknown = set(d) - set(_STORED)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
    for name, nullable in _TEXTS.items():
        value = d.get(name, "gemm" if name == "kernel" else None)
        if not (isinstance(value, str) or (nullable and value is None)):
            raise ValueError(f"{name} must be text, got {value!r}")
    spec = kernel_spec(d.get("kernel", "gemm"))
    shape = spec.shape_type(**_object(d["shape"], "shape"))
    if not isinstance(d["trials"], list) or not d["trials"]:
        raise ValueError("trials must be a non-empty list")
    trials = tuple(_trial(spec, t, i) for i, t in enumerate(d["trials"], start=1))
    winner = space_config(spec, d["winner"], "winner")
    if winner not in {t.config for t in trials}:
        raise ValueError(f"the winner {winner} is none of its trials' configs")
    phases = d.get("phases_s")
    if phases is not None:
        phases = {k: _figure(v, f"phases_s[{k!r}]", None) for k, v in _object(phases, "phases_s").items()}
    baseline = d.get("baseline_us")
    return TuneResult(**{**d, "shape": shape, "winner": winner, "trials": trials, "phases_s": phases,
                         "time_us": check_time_us(d["time_us"], "time_us"),
                         "baseline_us": None if baseline is None else check_time_us(baseline, "baseline_us")})


def keyed_result(key: str, d) -> TuneResult:
    """`result_from_dict(d)` (marked `cached`) where it is a result for `key`: of the shape and the space version the
    key names (`cache_key`'s fields, counted from its end: a GPU's name may hold a '|'); a ValueError where it is
    another's (an entry of 7x2560x2048 under 1024x2560x2048's key)."""
    result = result_from_dict(d)
    parts = key.split("|")
    if len(parts) >= KEY_FIELDS:
        shape, space = parts[-6], parts[-5]
        if shape_id(result.shape) != shape:
            raise ValueError(f"it holds a tune of {shape_id(result.shape)}, not of {shape} as its key says")
        if result.space_version != space:
            raise ValueError(f"it holds a tune over space {result.space_version}, not {space} as its key says")
    return replace(result, cached=True)
