"""Reading the user's input files: a regular file (or a folder where one is asked for), never a pipe or device, read
as UTF-8 text, each failure an `InputError` naming the path and what it is instead.

A FIFO or a character device given where a file is expected would block a reader forever (or read without end:
/dev/zero), so `check_input` looks at what the path is (a stat, which never blocks) before anything opens it.
Loaders keep their own messages for a missing file or bad content; this module answers the questions every
loader shares: is it a file, is it text (and, `read_json`, is it JSON).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path


class InputError(ValueError):
    """An input path that is not a regular file (or folder, where one may be given), or whose bytes are not text."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_input(path: str | os.PathLike, folder: bool = False) -> Path:
    """`path` where it is missing (the caller says so in its own words), a regular file, or with `folder` a folder;
    InputError for anything else: a pipe, socket or device (which would block or never end), or a folder where a
    file is expected."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return path
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISREG(mode) or (folder and stat.S_ISDIR(mode)):
        return path
    if stat.S_ISDIR(mode):
        raise InputError(f"{path}: is a folder; give a file's path")
    raise InputError(f"{path}: is {_kind(mode)}; inputs must be regular files"
                     + (" or folders" if folder else "") + " (a pipe or device would block or never end)")


def read_text(path: str | os.PathLike) -> str:
    """The UTF-8 text of the regular file at `path` (`check_input`); InputError where it is missing, cannot be
    read, or holds bytes that are not UTF-8 text (a binary file where a JSON or CSV is expected)."""
    path = check_input(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a text file (byte {data[exc.start]:#04x} at offset {exc.start} is not "
                         f"UTF-8): a binary file where JSON or CSV text is expected") from None



def read_json(path: str | os.PathLike, error: type[Exception], missing: str = "no such file"):
    """The JSON value of the file at `path` (`read_text`); `error` (the caller's error class) where it is missing
    (saying `missing`) or is not valid JSON."""
    path = check_input(path)  # a folder, a pipe or a device: refused before anything opens it
    if not path.is_file():
        raise error(f"{path}: {missing}")
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON ({exc})") from None
