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

A writer holds an exclusive flock on its temporary file until the rename, so a writer killed mid-write (SIGKILL,
a lost machine) leaves a `.NAME.xxxxxxxx.tmp` that nobody holds: the next write of NAME removes each such file
older than STALE_TEMP_S (the age keeps the instant between mkstemp and the flock safe), and never one that a
live writer holds.

`file_lock` is the one lock of a read-modify-write that several processes share (a dataset's manifest, the tune
cache): an exclusive `fcntl.flock` on a lock file beside the shared file. A lock on the shared file itself would
not do: each write replaces it by a rename, so a later writer would lock the new inode while an earlier one holds
the old. flock is in the standard library, the kernel releases it when its holder dies (no stale lock to clean up
after a SIGKILL), and on Linux it holds across NFS clients too (emulated with byte-range locks since 2.6.12).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

# A temporary file of `write_atomic` older than this and held by no writer is a killed writer's: removed.
STALE_TEMP_S = 60.0
# mkstemp's names: the prefix and suffix given, 8 characters of its alphabet between
_TEMP_NAME = r"\.{name}\.[a-z0-9_]{{8}}\.tmp"
# How often a lock with a timeout is tried again while another process holds it.
LOCK_POLL_S = 0.05


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


def _held(path: Path) -> bool:
    """Whether a live process holds a flock on the file at `path` (a writer of `write_atomic` holds its temporary
    file's until the rename). A file that is gone, or cannot be opened, counts as held: it is left alone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the lock where it was taken


def remove_stale_temps(target: Path) -> list[Path]:
    """Remove the temporary files a killed writer of `target` left beside it (module docstring): named as
    `write_atomic` names them, older than STALE_TEMP_S and held by no writer. Returns those removed."""
    pattern = re.compile(_TEMP_NAME.format(name=re.escape(target.name)))
    removed = []
    try:
        candidates = [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:
        return removed
    for tmp in candidates:
        try:
            old = time.time() - tmp.lstat().st_mtime > STALE_TEMP_S
        except OSError:
            continue
        if old and tmp.is_file() and not _held(tmp):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` (text as UTF-8) to `path` whole or not at all (module docstring), making its folder
    if needed; returns the path written. Raises OutputError on any failure of the system's."""
    path = Path(path)
    target, mode = _target(path)
    kept = "left as it was" if mode is not None else "nothing written"
    payload = data.encode() if isinstance(data, str) else data
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(target)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"{path}: cannot create a file in {target.parent} ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # held until the rename: this file is no killed writer's
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


@contextmanager
def file_lock(path: str | os.PathLike, timeout_s: float | None = None, what: str = "") -> Iterator[None]:
    """Hold an exclusive flock on the lock file at `path` (created where missing, its folder too; never removed, so
    every process locks the same inode) for a read-modify-write of a file several processes share (module
    docstring). With `timeout_s`, OutputError once another process has held it that long (naming `what` it
    guards), rather than wait forever on one that hangs; OutputError where the lock file cannot be opened."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a")
    except OSError as exc:
        raise OutputError(f"{path}: cannot open the lock file{f' of {what}' if what else ''} "
                          f"({exc.strerror or exc})") from None
    with f:
        _lock(f, path, timeout_s, what)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _lock(f, path: Path, timeout_s: float | None, what: str) -> None:
    if timeout_s is None:
        fcntl.flock(f, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise OutputError(f"{path}: another process has held this lock{f' of {what}' if what else ''} for "
                                  f"over {timeout_s:g} s (a hung writer?); nothing written") from None
            time.sleep(LOCK_POLL_S)


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
