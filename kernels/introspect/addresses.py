"""Where a load's tile lies, as far as the program decides it: the scalar part of a pointer's offset from its argument
(or a descriptor load's coordinates), an expression of the call, so that programs reading the same tiles can be
told apart from programs reading different ones (what the generic model's L2 reuse reads: roofline/generic.py).

A tile pointer is an argument plus offsets: scalar ones (`tt.addptr %arg, %off : !tt.ptr<T>, i32`), and tensor
ones whose scalar part is read through splats, expand_dims, broadcasts, adds and products by a scalar, with
`tt.make_range` contributing nothing (the lanes of one tile); a remainder or quotient of such an offset keeps its
scalar part's (it still tells which tiles a program reads, which is all the address is for). A loop-carried pointer is its initial value: the
loop walks every program's tiles alike, so programs that start on the same tile read the same ones. An offset
that comes from loaded data (gathered rows) or anything else is not a program's choice: no address then.
"""

from __future__ import annotations

import re

from rooftune.kernels.introspect.expressions import Apply, Const, Expr, build
from rooftune.kernels.introspect.ttir import Op, split_top, tensor_types

# Ops a tensor's scalar part passes through unchanged (a pointer's or an offset's).
_SHAPE_OPS = {"tt.splat", "tt.broadcast", "tt.expand_dims", "tt.reshape", "tt.trans", "ttg.convert_layout",
              "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "tt.bitcast"}
ZERO = Const(0.0)


def _plus(a: Expr, b: Expr) -> Expr:
    return b if a == ZERO else a if b == ZERO else Apply("add", (a, b))


def _times(a: Expr, b: Expr) -> Expr:
    return ZERO if ZERO in (a, b) else Apply("mul", (a, b))


def _scalar(name: str, defs) -> bool:
    """Whether SSA value `name` is a scalar (its defining op's result type is no tensor)."""
    d = defs.get(name)
    if d is None or d.op is None:
        return True  # an argument, a loop index, a loop-carried value: scalars where offsets use them
    return not tensor_types(d.op.text.split(":")[-1])


def scalar_part(name: str, defs, memo, depth: int = 0) -> Expr | None:
    """The scalar part of an integer offset `name` (the same for every lane of its tile), or None where it is not a
    program's choice (loaded data, an op this does not read)."""
    if depth > 64:
        return None
    if _scalar(name, defs):
        return build(name, defs, memo)
    op: Op = defs[name].op
    if op.name == "tt.make_range":
        return ZERO
    if op.name == "arith.constant":
        return build(name, defs, memo)
    if op.name in _SHAPE_OPS:
        return scalar_part(op.operands[0], defs, memo, depth + 1)
    parts = [scalar_part(o, defs, memo, depth + 1) for o in op.operands[:2]]
    if op.name in ("arith.addi", "arith.subi") and None not in parts:
        return _plus(parts[0], parts[1]) if op.name == "arith.addi" else Apply("sub", tuple(parts))
    if op.name == "arith.muli" and None not in parts:
        # a lane-varying factor times a scalar: the scalar part scales; (range · stride) has none
        return _times(parts[0], parts[1])
    if op.name in ("arith.remsi", "arith.remui", "arith.divsi", "arith.divui") and None not in parts:
        # (start + lanes) % n or / n: the tile's start so reduced names the same tiles (an identifier, not a span)
        return Apply("rem" if "rem" in op.name else "div", tuple(parts))
    return None


def address(pointer: str, op: Op, defs, memo) -> tuple[Expr, ...] | None:
    """The program's part of where load or store `op` reads: a descriptor's coordinates, or the scalar offset of
    pointer `pointer` from its argument (elements); None where it is not the program's to say."""
    if op.name.startswith("tt.descriptor"):
        coords = re.search(r"\[([^\]]*)\]", op.text)
        names = re.findall(r"%([\w$.\-#]+)", coords.group(1)) if coords else []
        parts = [scalar_part(n, defs, memo) for n in names]
        return tuple(parts) if parts and None not in parts else None
    param, passed = trace_pointer(pointer, defs, {"tt.addptr": 0, **dict.fromkeys(_SHAPE_OPS, 0)})
    if param is None:
        return None
    offset: Expr = ZERO
    for step in passed:
        if step.name == "tt.addptr":
            part = scalar_part(step.operands[1], defs, memo)
            if part is None:
                return None
            offset = _plus(offset, part)
    return (offset,)


def trace_pointer(name: str, defs, steps: dict[str, int]) -> tuple[str | None, list[Op]]:
    """(the argument a pointer `name` comes from, the ops it passed through on the way), following each op of
    `steps` to its operand of the given index and loop-carried values to their initial value; (None, ops) where it
    meets anything else."""
    passed: list[Op] = []
    for _ in range(64):
        d = defs.get(name)
        if d is None:
            return None, passed
        if d.param is not None:
            return d.param, passed
        if d.op is None:
            if d.init is None:
                return None, passed
            name = d.init
        elif d.op.name == "scf.for":
            name = iter_init(d.op, name)
            if name is None:
                return None, passed
        elif d.op.name in steps and steps[d.op.name] < len(d.op.operands):
            passed.append(d.op)
            name = d.op.operands[steps[d.op.name]]
        else:
            return None, passed
    return None, passed


def for_header(op: Op) -> tuple[str, str, str, str, list[str], list[str]]:
    """(iv, lower, upper, step, iter-arg inits, iter-arg names) of an `scf.for`."""
    m = re.match(r"\s*%([\w$.\-]+)\s*=\s*%([\w$.\-#]+)\s+to\s+%([\w$.\-#]+)\s+step\s+%([\w$.\-#]+)", op.text)
    if m is None:
        raise ValueError(f"unreadable scf.for: {op.text[:80]}")
    carried = re.search(r"iter_args\((.*?)\)\s*->", op.text) or re.search(r"iter_args\((.*)\)", op.text)
    pairs = [p.split("=") for p in split_top(carried.group(1))] if carried else []
    names = [p[0].strip().lstrip("%") for p in pairs]
    inits = [p[1].strip().lstrip("%") for p in pairs]
    return m.group(1), m.group(2), m.group(3), m.group(4), inits, names


def iter_init(op: Op, result: str) -> str | None:
    """The initial value of the iter-arg an `scf.for` result `result` ('acc#1', or 'acc' for its one) carries."""
    inits = for_header(op)[4]
    index = int(result.split("#")[1]) if "#" in result else 0
    return inits[index] if index < len(inits) else None
