"""Writing output files whole or not at all: the one writer every dataset file, cache, profile, residual,
report and picture goes through, and the strict JSON they are written in.

`write_atomic` writes a temporary file beside the target and renames it into place, so a reader (or a
killed writer) sees the old file or the new one, never part of one; a write that fails (a full disk, a
folder such as /proc or /sys that takes no new files) removes its temporary file, leaves the target as
it was and raises `OutputError` naming the path and the system's reason. It never renames over
something that is not a regular file (a device such as /dev/full, a pipe, a folder): that would replace
the device node itself. A symbolic link is written through, to the file it names. A new file gets the
permissions a plain `open(path, "w")` gives (0666 less the umask; mkstemp's own are 0600), a replaced
one keeps its own.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path


class OutputError(OSError):
    """An output that could not be written; nothing was left in its place (its old content, if any, stays)."""


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it: once, at import, before any threads
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _target(path: Path) -> tuple[Path, int | None]:
    """The file to replace (through symbolic links) and its permissions (None: there is none yet);
    OutputError where something other than a regular file is there."""
    target = path.resolve() if path.is_symlink() else path
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target, None
    except OSError as exc:
        raise OutputError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a folder; give a file name")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{path}: is not a regular file (a device, pipe or socket): an output is written to a "
                          f"new file renamed into place, which would replace it; give a regular file's path")
    return target, stat.S_IMODE(st.st_mode)


def check_not_input(path: str | os.PathLike, inputs: Iterable[str | os.PathLike | None]) -> None:
    """OutputError where `path` is one of a command's `inputs` (a file it reads), or an existing file inside a folder
    it reads (a dataset, whose manifest or shape file an output would replace; a new file beside them replaces
    nothing). Inputs that are not existing paths (None, a shipped profile's name) are skipped; links are followed."""
    target = Path(path).resolve()
    for given in inputs:
        if given is None or not Path(given).exists():
            continue
        source = Path(given).resolve()
        if target == source or (source.is_dir() and source in target.parents and target.exists()):
            where = "is" if target == source else "is inside"
            raise OutputError(f"{path}: {where} {given}, an input of this command: writing it would replace what "
                              f"is being read; give another path")


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` (text as UTF-8) to `path` whole or not at all (module docstring), making its folder
    if needed; returns the path written. Raises OutputError on any failure of the system's."""
    path = Path(path)
    target, mode = _target(path)
    kept = "left as it was" if mode is not None else "nothing written"
    payload = data.encode() if isinstance(data, str) else data
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"{path}: cannot create a file in {target.parent} ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_UMASK if mode is None else mode)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())  # a full disk may refuse only here
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"{path}: could not be written ({exc.strerror or exc}); {kept}") from None
        raise
    return path


def write_all(writes: Iterable[tuple[str | os.PathLike, Callable[[], object]]],
              done: Callable[[Path], None] | None = None) -> list[Path]:
    """Run every (path, write) pair, each `write()` writing its `path` (through `write_atomic`), the
    others too after one fails; `done(path)` after each that succeeded. Returns the paths written, or
    raises one OutputError naming every path that was not, and why, once all were tried."""
    written, failed = [], []
    writes = list(writes)
    for path, write in writes:
        try:
            write()
        except OutputError as exc:
            failed.append(str(exc))
            continue
        written.append(Path(path))
        if done is not None:
            done(Path(path))
    if failed:
        head = "" if len(writes) == 1 else f"{len(failed)} of {len(writes)} outputs not written: "
        raise OutputError(head + "; ".join(failed))
    return written


def _finite(value):
    """`value` with every float that is not finite (NaN, ±inf) replaced by None, in lists and dicts too."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_text(value, indent: int | None = 2) -> str:
    """`value` as strict JSON (a figure that is undefined, e.g. a mean over no shapes, is null rather than
    Python's NaN, which JSON does not have), ending in a newline."""
    return json.dumps(_finite(value), indent=indent, allow_nan=False) + "\n"


def file_digest(path: str | Path) -> str:
    """The first 16 hex digits of the file's SHA-256: what a cache key or a manifest names a source file by."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
