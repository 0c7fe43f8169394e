"""Integer expressions of a kernel's IR (loop bounds, branch conditions) traced back to what a call gives: the
arguments, the program's id in the grid, constants, and scalars loaded from the call's tensors; evaluated for every
program of a grid at once (NumPy arrays over programs).

`build` follows an SSA value's definitions through Triton's integer ops (`arith.addi`, `muli`, `divsi`,
`ceildivsi`, `remsi`, `minsi`, `select`, `cmpi`, casts, `tt.get_program_id`, `tt.get_num_programs`); a value carried
by a loop, merged from branches or computed by anything else is `Unknown` with the reason. A loop's induction
variable is `LoopIndex`, evaluated at its mean over the loop (lb + step·(trips − 1) / 2): exact for the affine
uses loop bounds and conditions mostly make of it, approximate inside a division. Arithmetic is in float64, with
Triton's integer semantics (division truncating toward zero, the remainder's sign the dividend's).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rooftune.kernels.introspect.ttir import Op, scalar_pointee, tensor_types

Values = np.ndarray  # float64, one value per evaluated program (or a 0-d array)


@dataclass(frozen=True)
class Const:
    value: float

    def __str__(self) -> str:
        return str(int(self.value)) if float(self.value).is_integer() else f"{self.value:g}"


@dataclass(frozen=True)
class Arg:
    """An integer argument of the call, by the kernel's parameter name."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ProgramId:
    axis: int

    def __str__(self) -> str:
        return f"program_id({self.axis})"


@dataclass(frozen=True)
class NumPrograms:
    axis: int

    def __str__(self) -> str:
        return f"num_programs({self.axis})"


@dataclass(frozen=True)
class LoopIndex:
    """The induction variable of loop `loop` (kernels/introspect/work.py numbers the loops)."""

    loop: int

    def __str__(self) -> str:
        return f"i{self.loop}"


@dataclass(frozen=True)
class Loaded:
    """A scalar loaded from the call's tensor argument `name` at element `offset` (data the call holds)."""

    name: str
    offset: object

    def __str__(self) -> str:
        return f"{self.name}[{self.offset}]"


@dataclass(frozen=True)
class Unknown:
    why: str

    def __str__(self) -> str:
        return "?"


@dataclass(frozen=True)
class Apply:
    op: str
    args: tuple

    def __str__(self) -> str:
        a = [str(x) for x in self.args]
        if self.op in _INFIX:
            return f"({a[0]} {_INFIX[self.op]} {a[1]})"
        if self.op == "select":
            return f"({a[1]} if {a[0]} else {a[2]})"
        return f"{self.op}({', '.join(a)})"


@dataclass(frozen=True)
class Chance:
    """The share of programs for which `cond` holds (1 true, 0 false): its value, or one half where the call
    cannot give it (the stated rule for a branch on data the call does not hold)."""

    cond: object

    def __str__(self) -> str:
        return f"P({self.cond})"


Expr = Const | Arg | ProgramId | NumPrograms | LoopIndex | Loaded | Unknown | Apply | Chance
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "and": "&", "or": "|", "xor": "^",
          "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_BINARY = {"addi": "add", "subi": "sub", "muli": "mul", "divsi": "div", "divui": "div", "remsi": "rem",
           "remui": "rem", "ceildivsi": "cdiv", "ceildivui": "cdiv", "floordivsi": "fdiv", "minsi": "min",
           "minui": "min", "maxsi": "max", "maxui": "max", "andi": "and", "ori": "or", "xori": "xor",
           "shli": "shl", "shrsi": "shr", "shrui": "shr", "addf": "add", "subf": "sub", "mulf": "mul",
           "divf": "fdivide", "minimumf": "min", "maximumf": "max", "minnumf": "min", "maxnumf": "max"}
_PREDICATES = {"eq": "eq", "ne": "ne", "slt": "lt", "ult": "lt", "sle": "le", "ule": "le", "sgt": "gt",
               "ugt": "gt", "sge": "ge", "uge": "ge", "oeq": "eq", "one": "ne", "olt": "lt", "ole": "le",
               "ogt": "gt", "oge": "ge"}
_PASS_THROUGH = {"arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui",
                 "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui", "arith.extf", "arith.truncf",
                 "tt.splat"}
_AXES = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class Definition:
    """Where an SSA value comes from: an op's result, a function argument (its parameter), a loop's induction
    variable, a loop-carried value (`init`), or another block argument (`why` it is unknown)."""

    op: Op | None = None
    param: str | None = None
    loop: int | None = None
    why: str = ""
    init: str | None = None  # a loop-carried value: the value it starts from


def _constant(op: Op) -> Expr:
    m = re.match(r"\s*(?:dense<)?\s*(-?[\d.e+\-]+|true|false)", op.text)
    if m is None:
        return Unknown(f"constant {op.text.strip()[:40]}")
    text = m.group(1)
    return Const(1.0 if text == "true" else 0.0 if text == "false" else float(text))


def build(name: str, defs: dict[str, Definition], memo: dict[str, Expr] | None = None) -> Expr:
    """The expression SSA value `name` is, from `defs` (module docstring)."""
    memo = {} if memo is None else memo
    if name in memo:
        return memo[name]
    memo[name] = Unknown("a value defined in terms of itself")
    memo[name] = expr = _build(name, defs, memo)
    return expr


def _build(name: str, defs: dict[str, Definition], memo: dict) -> Expr:
    d = defs.get(name)
    if d is None:
        return Unknown(f"%{name} is not defined where it is used")
    if d.loop is not None:
        return LoopIndex(d.loop)
    if d.param is not None:
        return Arg(d.param)
    if d.init is not None:
        return Unknown("a value carried by a loop")
    if d.op is None:
        return Unknown(d.why or f"%{name} is a block argument")
    op, kind = d.op, d.op.name.split(".")[-1]
    if op.name == "arith.constant":
        return _constant(op)
    if op.name in ("tt.get_program_id", "tt.get_num_programs"):
        axis = _AXES.get(op.text.split()[0].strip(), 0) if op.text.split() else 0
        return ProgramId(axis) if op.name == "tt.get_program_id" else NumPrograms(axis)
    if op.name in _PASS_THROUGH:
        return build(op.operands[0], defs, memo)
    if op.name.startswith("arith.") and kind in _BINARY:
        return Apply(_BINARY[kind], tuple(build(o, defs, memo) for o in op.operands[:2]))
    if op.name in ("arith.cmpi", "arith.cmpf"):
        predicate = op.text.split(",")[0].strip()
        return Apply(_PREDICATES.get(predicate, "?"), tuple(build(o, defs, memo) for o in op.operands[:2]))
    if op.name == "arith.select":
        return Apply("select", tuple(build(o, defs, memo) for o in op.operands[:3]))
    if op.name == "tt.load" and not tensor_types(op.text):
        return _scalar_load(op, defs, memo)
    return Unknown(f"%{name} = {op.name}")


def _scalar_load(op: Op, defs: dict[str, Definition], memo: dict) -> Expr:
    """A scalar `tt.load` from an argument pointer (plus integer offsets): data the call's tensor holds."""
    pointer = defs.get(op.operands[0])
    offset: Expr = Const(0.0)
    while pointer is not None and pointer.op is not None and pointer.op.name == "tt.addptr":
        step = build(pointer.op.operands[1], defs, memo)
        offset = step if offset == Const(0.0) else Apply("add", (offset, step))
        pointer = defs.get(pointer.op.operands[0])
    if pointer is None or pointer.param is None or scalar_pointee(op.text) is None:
        return Unknown("a value loaded through a computed pointer")
    return Loaded(pointer.param, offset)


# --- evaluation -------------------------------------------------------------------------------------------

Reader = Callable[[str, np.ndarray], "np.ndarray | None"]


@dataclass
class Env:
    """What an evaluation knows: integer `args` by name, the `grid` (x, y, z), each evaluated program's ids
    (`pids`, arrays of the same length), the loops' mean induction variables (filled as they are evaluated),
    and `read(name, offsets)`: elements of the call's tensor `name` (None where it cannot be read)."""

    args: dict[str, float]
    grid: tuple[int, int, int]
    pids: tuple[np.ndarray, np.ndarray, np.ndarray]
    read: Reader = lambda name, offsets: None
    loop_means: dict[int, np.ndarray] = field(default_factory=dict)
    loop_starts: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # first index and step
    memo: dict[int, object] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)  # the branches counted by the one-half rule


def _trunc_div(a: Values, b: Values) -> Values:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.trunc(a / b)


def _integral(a: Values) -> bool:
    return bool(np.all(np.isfinite(a)) and np.all(a == np.round(a)))


def _bitwise(op: str, a: Values, b: Values) -> Values:
    if _integral(a) and _integral(b):
        x, y = a.astype(np.int64), b.astype(np.int64)
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](x, y).astype(float)
    # fractions (a condition averaged over a loop): probabilities, taken as independent
    return {"and": a * b, "or": a + b - a * b, "xor": a + b - 2 * a * b}[op]


def _apply(op: str, v: list[Values]) -> Values | None:
    a, b = v[0], v[1] if len(v) > 1 else None
    with np.errstate(divide="ignore", invalid="ignore"):
        table = {
            "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: _trunc_div(a, b),
            "fdiv": lambda: np.floor(a / b), "cdiv": lambda: np.ceil(a / b), "fdivide": lambda: a / b,
            "rem": lambda: np.fmod(a, b), "min": lambda: np.minimum(a, b), "max": lambda: np.maximum(a, b),
            "shl": lambda: a * 2.0 ** b, "shr": lambda: np.floor(a / 2.0 ** b),
            "eq": lambda: (a == b) * 1.0, "ne": lambda: (a != b) * 1.0, "lt": lambda: (a < b) * 1.0,
            "le": lambda: (a <= b) * 1.0, "gt": lambda: (a > b) * 1.0, "ge": lambda: (a >= b) * 1.0,
            "select": lambda: np.where(v[0] >= 1, v[1], np.where(v[0] <= 0, v[2], v[0] * v[1] + (1 - v[0]) * v[2])),
        }
        if op in ("and", "or", "xor"):
            return _bitwise(op, a, b)
        result = table[op]() if op in table else None
    return None if result is None or not np.all(np.isfinite(result)) else np.asarray(result, dtype=float)


def evaluate(expr: Expr, env: Env) -> Values | None:
    """`expr` for every program of `env` (an array, or a 0-d array where it is the same for all); None where
    the call cannot give it."""
    key = id(expr)
    if key not in env.memo:
        env.memo[key] = (expr, _evaluate(expr, env))  # the expression kept alive: its id stays its own
    return env.memo[key][1]


def _evaluate(expr: Expr, env: Env) -> Values | None:
    if isinstance(expr, Const):
        return np.asarray(expr.value, dtype=float)
    if isinstance(expr, Arg):
        value = env.args.get(expr.name)
        return None if value is None else np.asarray(float(value))
    if isinstance(expr, ProgramId):
        return env.pids[expr.axis].astype(float)
    if isinstance(expr, NumPrograms):
        return np.asarray(float(env.grid[expr.axis]))
    if isinstance(expr, LoopIndex):
        return env.loop_means.get(expr.loop)
    if isinstance(expr, Loaded):
        offsets = evaluate(expr.offset, env)
        if offsets is None or not _integral(offsets):
            return None
        return env.read(expr.name, np.broadcast_to(offsets, env.pids[0].shape).astype(np.int64))
    if isinstance(expr, Apply):
        values = [evaluate(a, env) for a in expr.args]
        return None if any(v is None for v in values) else _apply(expr.op, values)
    if isinstance(expr, Chance):
        value = evaluate(expr.cond, env)
        if value is None:
            why = unknown_reason(expr.cond) or "data the call does not hold"
            env.unresolved.append(f"a branch on {expr.cond} ({why}) is counted as taken by half the programs")
            return np.asarray(0.5)
        return np.clip(value, 0.0, 1.0)
    return None


def trip_count(lower: Values, upper: Values, step: Values) -> Values:
    """Iterations of `for i in range(lower, upper, step)`: ceil((upper − lower) / step), at least 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        trips = np.ceil((upper - lower) / step)
    return np.where(np.isfinite(trips) & (step != 0), np.maximum(trips, 0.0), 0.0)


def is_known(expr: Expr) -> bool:
    """Whether `expr` has no `Unknown` part (a `Loaded` one may still be unreadable at evaluation)."""
    if isinstance(expr, Unknown):
        return False
    if isinstance(expr, Apply):
        return all(is_known(a) for a in expr.args)
    if isinstance(expr, (Loaded, Chance)):
        return is_known(expr.offset if isinstance(expr, Loaded) else expr.cond)
    return True


def unknown_reason(expr: Expr) -> str:
    """Why `expr` cannot be evaluated from the call ('' where nothing in it is unknown)."""
    if isinstance(expr, Unknown):
        return expr.why
    if isinstance(expr, Apply):
        return next((r for a in expr.args if (r := unknown_reason(a))), "")
    if isinstance(expr, Chance):
        return unknown_reason(expr.cond)
    return unknown_reason(expr.offset) if isinstance(expr, Loaded) else ""


def largest(values: list[float]) -> float:
    """The largest finite of `values` (1 where there is none): the extent an unbounded loop is assumed to sweep."""
    finite = [abs(v) for v in values if math.isfinite(v)]
    return max(finite, default=1.0) or 1.0
