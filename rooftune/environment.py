"""rooftune's environment variables, read and checked in one place: a boolean setting (ROOFTUNE_TUNE,
ROOFTUNE_FALLBACK, ROOFTUNE_KERNEL_ONLY) and a path setting (ROOFTUNE_CACHE, XDG_CACHE_HOME), each failure a
`SettingError` naming the variable and its value.

A boolean is one of BOOLEAN_WORDS, in any case, or unset or empty (its default); anything else (`maybe`, `2`) is
refused rather than read as off, which would silently leave a tune or a fallback out. A path's `~` or `~user` is
expanded; one that names no home directory (`~nouser/x.json`, or `~` where $HOME is unset and the user has no
home) is refused, naming the variable, where Python would raise "Could not determine home directory".
"""

from __future__ import annotations

import os
from pathlib import Path

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
BOOLEAN_WORDS = TRUE_WORDS + FALSE_WORDS


class SettingError(ValueError):
    """An environment variable whose value rooftune cannot use."""


def env_flag(name: str, default: bool = False) -> bool:
    """The boolean environment variable `name` (module docstring); `default` where it is unset or empty."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value not in BOOLEAN_WORDS:
        raise SettingError(f"${name}={raw!r} is not a boolean: set it to one of {', '.join(TRUE_WORDS)} (on) or "
                           f"{', '.join(FALSE_WORDS)} (off), or unset it")
    return value in TRUE_WORDS


def expand_home(text: str, what: str) -> Path:
    """`text` as a path, `~` and `~user` expanded; SettingError naming `what` (the variable it came from) where
    the home directory it names cannot be found."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # pathlib: "Could not determine home directory."
        user = text[1:].split("/", 1)[0]
        whose = f"user {user!r} has no home directory here" if user else "no home directory is known ($HOME is unset)"
        raise SettingError(f"{what}={text!r}: {whose}; give a path without '~', or an existing user's") from None


def env_path(name: str) -> Path | None:
    """The path the environment variable `name` holds (`~` expanded: `expand_home`), None where it is unset or empty."""
    raw = os.environ.get(name, "")
    return expand_home(raw, f"${name}") if raw else None


def home_folder(for_what: str) -> Path:
    """The user's home directory; SettingError where none is known, saying which variable gives `for_what` instead."""
    try:
        return Path.home()
    except RuntimeError:
        raise SettingError(f"no home directory is known ($HOME is unset), so {for_what} has no default place") from None
