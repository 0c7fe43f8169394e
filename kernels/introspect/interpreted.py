"""Triton's frontend in a process that runs Triton's interpreter (TRITON_INTERPRET=1, e.g. tests on a CPU).

Under the interpreter `triton.jit` gives `InterpretedFunction`s, triton.language's own jit functions (`tl.sum`,
`tl.max`, `tl.cdiv`, ...) included, and an interpreted call of one patches triton.language's builtins for good (its
`__call__`), so the frontend would call them as Python and build interpreter values. For the block of
`frontend_view`: the interpreter's knob is off, every interpreted function the frontend can reach (triton.language's
modules and the kernel's globals, transitively) is a JITFunction of the same Python function, and every builtin the
interpreter patched is its original; all of it is put back afterwards. Outside the interpreter it changes nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import triton.language as tl
from triton import knobs
from triton.runtime.jit import JITFunction

# The modules whose functions the frontend reaches by attribute (tl.sum, tl.math.exp, tensor methods).
LANGUAGE_MODULES = ("triton.language", "triton.language.core", "triton.language.standard", "triton.language.math")


def _is_interpreted(value) -> bool:
    return type(value).__name__ == "InterpretedFunction" and hasattr(value, "fn")


def _original_builtin(value):
    """The builtin an interpreter patch (a lambda holding it as its `member` default) stands for, else None."""
    member = (getattr(value, "__kwdefaults__", None) or {}).get("member")
    return member if member is not None and tl.core.is_builtin(member) else None


def _namespaces(fn) -> list[tuple[object, bool]]:
    """(namespace, is a dict) the frontend resolves names in: triton.language's modules and classes, and the
    globals of `fn` and of every interpreted function reachable from them."""
    spaces: list[tuple[object, bool]] = [(sys.modules[m], False) for m in LANGUAGE_MODULES if m in sys.modules]
    spaces += [(tl.tensor, False), (tl.core.tensor_descriptor_base, False)]
    seen, pending = set(), [fn.__globals__]
    while pending:
        g = pending.pop()
        if id(g) in seen:
            continue
        seen.add(id(g))
        spaces.append((g, True))
        pending += [v.fn.__globals__ for v in list(g.values()) if _is_interpreted(v)]
    return spaces


def _swaps(fn) -> list[tuple[object, bool, str, object, object]]:
    """(namespace, is a dict, name, interpreter's value, frontend's value) for each name to swap."""
    converted: dict[int, JITFunction] = {}
    out = []
    for space, is_dict in _namespaces(fn):
        items = list(space.items()) if is_dict else [(n, getattr(space, n, None)) for n in dir(space)]
        for name, value in items:
            if _is_interpreted(value):
                if id(value) not in converted:
                    converted[id(value)] = JITFunction(value.fn, **value.kwargs)
                out.append((space, is_dict, name, value, converted[id(value)]))
            elif (original := _original_builtin(value)) is not None:
                out.append((space, is_dict, name, value, original))
    return out


def _set(space, is_dict: bool, name: str, value) -> None:
    if is_dict:
        space[name] = value
    else:
        setattr(space, name, value)


@contextmanager
def frontend_view(fn: JITFunction) -> Iterator[None]:
    """The process as Triton's frontend needs it for lowering `fn` (module docstring)."""
    import triton.compiler.code_generator  # noqa: F401  (its import, under the interpreter, needs the knob on)

    if not knobs.runtime.interpret:
        yield
        return
    swaps = _swaps(fn)
    for space, is_dict, name, _, value in swaps:
        _set(space, is_dict, name, value)
    try:
        with knobs.runtime.scope():  # the knob and its environment variable put back as they were
            knobs.runtime.interpret = False
            yield
    finally:
        for space, is_dict, name, value, _ in reversed(swaps):
            _set(space, is_dict, name, value)
