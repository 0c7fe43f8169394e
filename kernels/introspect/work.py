"""What one program of a kernel does, read from its Triton IR: each dot, load, store and elementwise op with its
amount per execution, the loops around it (trip counts as expressions of the call) and the branches it sits under.

Per execution of an op: a `tt.dot` of A [M, K] by B [K, N] is 2·M·N·K FLOPs at its operands' dtype (f32 operands
at the dot's input precision: tf32 by default, 'ieee' fp32; tf32x3 three tf32 passes); a load or store moves its
tile's bytes, elements × element size, whatever its mask (a masked tile is counted whole: the IR cannot say how
many lanes a mask keeps), a scalar its element; a descriptor (TMA) load or store its block; an atomic reads and
writes its tile; an elementwise op on a tensor (`arith.*`, `math.*`, pointer arithmetic) one result per element,
on the special-function units for exp, log, sqrt, sin, cos, tanh, erf and division; a reduction or scan its combine
ops once per input element. Layout ops (splat, broadcast, reshape, transpose, ...) and scalar arithmetic cost
nothing here.

Loops: `scf.for` counts ceil((ub − lb) / step) iterations, each bound an expression of the call
(kernels/introspect/expressions.py); an `scf.while` whose condition compares a counter it advances by a fixed
step with a bound is counted as that for loop; any other while loop, and a for loop whose bounds the call cannot
give, by a stated rule (kernels/introspect/tally.py). Branches: `scf.if` and the blocks of an early `return`
(`cf.cond_br`) weigh their ops by the share of programs taking them.
"""

from __future__ import annotations

import re
from collections import ChainMap
from dataclasses import dataclass, field

from rooftune.kernels.introspect.addresses import address, for_header, trace_pointer
from rooftune.kernels.introspect.expressions import (
    Apply,
    Chance,
    Const,
    Definition,
    Expr,
    Unknown,
    build,
    is_known,
    unknown_reason,
)
from rooftune.kernels.introspect.ttir import (
    Function,
    Op,
    Region,
    element_bytes,
    scalar_pointee,
    split_top,
    tensor_types,
)

SFU_OPS = {"math.exp", "math.exp2", "math.log", "math.log2", "math.log1p", "math.expm1", "math.sqrt", "math.rsqrt",
           "math.sin", "math.cos", "math.tan", "math.tanh", "math.erf", "math.atan", "math.atan2", "math.powf",
           "arith.divf", "tt.precise_sqrt", "tt.precise_divf", "tt.extern_elementwise"}
VECTOR_TT_OPS = {"tt.addptr", "tt.clampf", "tt.mulhiui", "tt.fp_to_fp", "tt.int_to_ptr", "tt.ptr_to_int"}
LOAD_OPS = {"tt.load", "tt.descriptor_load", "tt.descriptor_gather"}
STORE_OPS = {"tt.store", "tt.descriptor_store", "tt.descriptor_scatter"}
READ_WRITE_OPS = {"tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_reduce"}
# How a pointer or descriptor is derived from another (the operand it comes from).
POINTER_STEPS = {"tt.addptr": 0, "tt.splat": 0, "tt.broadcast": 0, "tt.expand_dims": 0, "tt.reshape": 0,
                 "tt.trans": 0, "ttg.convert_layout": 0, "tt.make_tensor_ptr": 0, "tt.advance": 0,
                 "tt.make_tensor_descriptor": 0, "tt.bitcast": 0, "arith.select": 1, "tt.join": 0, "tt.cat": 0}
# A dot's operand element -> rooftune's dtype (the profile's rate); f32 goes by the dot's input precision.
DOT_DTYPES = {"bf16": "bf16", "f16": "fp16", "f8E4M3FN": "fp8e4m3", "f8E5M2": "fp8e4m3", "f8E4M3FNUZ": "fp8e4m3",
              "f8E5M2FNUZ": "fp8e4m3", "i8": "fp8e4m3", "f64": "fp32"}
F32_PRECISION = {"tf32": ("tf32", 1), "tf32x3": ("tf32", 3), "ieee": ("fp32", 1), "bf16x3": ("bf16", 3),
                 "bf16x6": ("bf16", 6)}


@dataclass(frozen=True)
class Loop:
    """A loop: `for i in range(lower, upper, step)` (a counted while loop: `inclusive` where it runs while
    i <= upper; `expected` where its counter enters the range at a phase the call does not give), its enclosing
    loop, the branch weights it sits under; `kind` 'for' or 'while'."""

    id: int
    kind: str
    lower: Expr
    upper: Expr
    step: Expr
    parent: int | None
    guards: tuple[Expr, ...] = ()
    inclusive: bool = False
    expected: bool = False  # a counter entering its range at any phase: (upper − lower) / step trips on average

    @property
    def known(self) -> bool:
        return all(is_known(e) for e in (self.lower, self.upper, self.step))

    def describe(self) -> str:
        """'for 0 .. K step 64' or the reason its count is not known."""
        if not self.known:
            why = next(unknown_reason(e) for e in (self.lower, self.upper, self.step) if not is_known(e))
            return f"{self.kind} loop {self.id}: trip count unknown ({why})"
        end = "..=" if self.inclusive else ".."
        return f"{self.kind} loop {self.id}: {self.lower} {end} {self.upper} step {self.step}"


@dataclass(frozen=True)
class WorkItem:
    """One op's work: `kind` 'dot' (FLOPs), 'load' / 'store' (bytes), 'vector' / 'sfu' (element results);
    `amount` per execution, in the loops `loops` (outermost first), weighed by `guards` (each the share of
    programs reaching it, an expression in [0, 1]); a load's or store's argument `tensor` (None: not traced to
    one); a dot's operand `dtype` and A + B tile bytes; `masked`: a load or store under a mask; `address`: where
    a load's tiles lie as the program decides it (None: not the program's to say)."""

    kind: str
    label: str
    amount: float
    loops: tuple[int, ...] = ()
    guards: tuple[Expr, ...] = ()
    tensor: str | None = None
    dtype: str | None = None
    operand_bytes: float = 0.0
    masked: bool = False
    address: tuple[Expr, ...] | None = None  # where the program's tiles start (kernels/introspect/addresses.py)
    waits: bool = False  # a dot that waits for its results before the program goes on (`_chained`)


@dataclass(frozen=True)
class KernelWork:
    """A kernel's per-program work as the IR states it, before a call's values are put in."""

    name: str
    items: tuple[WorkItem, ...]
    loops: tuple[Loop, ...]
    notes: tuple[str, ...] = ()


@dataclass
class _Walk:
    """The walk's accumulators."""

    function: Function
    items: list = field(default_factory=list)
    loops: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def _dot(op: Op) -> tuple[float, str, float, str]:
    """(FLOPs, dtype, A + B bytes, label) of one `tt.dot` execution."""
    a, b, *_ = tensor_types(op.text)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = a.numel // (m * k)
    if a.element == "f32":
        precision = re.search(r"inputPrecision\s*=\s*(\w+)", op.text)
        dtype, passes = F32_PRECISION.get(precision.group(1) if precision else "tf32", ("tf32", 1))
    else:
        dtype, passes = DOT_DTYPES.get(a.element, "fp16"), 1
    operand = (a.numel * element_bytes(a.element) + b.numel * element_bytes(b.element))
    return 2.0 * batch * m * n * k * passes, dtype, float(operand), f"tt.dot {m}x{n}x{k} {dtype}"


def _moved_bytes(op: Op) -> tuple[float, str]:
    """Bytes one load or store of `op` moves, and its label."""
    types = tensor_types(op.text)
    if op.name in ("tt.load", "tt.store", "tt.atomic_rmw", "tt.atomic_cas"):
        pointers = [t for t in types if t.pointee is not None]
        if pointers:
            t = pointers[0]
            return float(t.numel * element_bytes(t.pointee)), f"{op.name} {'x'.join(map(str, t.shape))}x{t.pointee}"
        if types:  # a block pointer's tensor
            t = types[0]
            return float(t.numel * element_bytes(t.element)), f"{op.name} {'x'.join(map(str, t.shape))}x{t.element}"
        pointee = scalar_pointee(op.text) or "i32"
        return float(element_bytes(pointee)), f"{op.name} scalar {pointee}"
    t = types[-1]
    return float(t.numel * element_bytes(t.element)), f"{op.name} {'x'.join(map(str, t.shape))}x{t.element}"


def origin(name: str, defs) -> str | None:
    """The argument a pointer or descriptor value `name` is derived from, through pointer arithmetic, layout ops
    and loop-carried values (None where it is not traced to one)."""
    return trace_pointer(name, defs, POINTER_STEPS)[0]


# --- the walk ---------------------------------------------------------------------------------------------

def _times(a: Expr | None, b: Expr) -> Expr:
    return b if a is None or a == Const(1.0) else a if b == Const(1.0) else Apply("mul", (a, b))


def _plus(a: Expr | None, b: Expr) -> Expr:
    return b if a is None else Apply("add", (a, b))


def _chained(dot: Op, defs) -> bool:
    """Whether a dot accumulates straight into the accumulator a loop carries (or another dot's result): the
    matrix units chain such dots (a GEMM's K loop); a dot whose accumulator or result passes through other work
    first waits for its results (attention's QKᵀ before the softmax, PV after the rescale)."""
    if len(dot.operands) < 3:
        return False
    d = defs.get(dot.operands[2])
    return d is not None and (d.init is not None or (d.op is not None and d.op.name == "tt.dot"))


def _op_items(op: Op, defs, memo, loops: tuple[int, ...], guards: tuple) -> list[WorkItem]:
    """The work of one op that is neither a loop, a branch nor a call."""
    place = dict(loops=loops, guards=guards)
    if op.name == "tt.dot":
        flops, dtype, operand, label = _dot(op)
        return [WorkItem("dot", label, flops, dtype=dtype, operand_bytes=operand, waits=not _chained(op, defs),
                         **place)]
    moves = op.name in LOAD_OPS | STORE_OPS | READ_WRITE_OPS
    if moves:
        amount, label = _moved_bytes(op)
        tensor = origin(op.operands[0], defs) if op.operands else None
        masked = (op.name == "tt.load" and len(op.operands) > 1) or (op.name == "tt.store" and len(op.operands) > 2)
        kinds = ["load"] if op.name in LOAD_OPS else ["store"] if op.name in STORE_OPS else ["load", "store"]
        where = address(op.operands[0], op, defs, memo) if op.operands else None
        return [WorkItem(kind, label, amount, tensor=tensor, masked=masked, address=where, **place) for kind in kinds]
    if op.name in ("tt.reduce", "tt.scan"):
        combine = [o for r in op.regions for o in r.ops if not o.name.endswith("return")]
        inputs = tensor_types(op.tail) or tensor_types(op.text)
        if not inputs:
            return []
        sfu = sum(o.name in SFU_OPS for o in combine)
        items = [WorkItem("vector", f"{op.name} {inputs[0].numel}", float(inputs[0].numel * len(combine)), **place)]
        return items + ([WorkItem("sfu", op.name, float(inputs[0].numel * sfu), **place)] if sfu else [])
    elementwise = op.name.startswith(("arith.", "math.")) or op.name in SFU_OPS | VECTOR_TT_OPS
    types = tensor_types(op.text) if elementwise and op.name != "arith.constant" else []
    if not types:
        return []
    kind = "sfu" if op.name in SFU_OPS else "vector"
    return [WorkItem(kind, op.name, float(types[-1].numel), **place)]


def _define(op: Op, defs) -> None:
    for r in op.results:
        defs[r] = Definition(op=op)


def _ops(walk: _Walk, ops, defs, memo, loops: tuple[int, ...], guards: tuple) -> None:
    for op in ops:
        _define(op, defs)
        if op.name == "scf.for":
            _for(walk, op, defs, memo, loops, guards)
        elif op.name == "scf.while":
            _while(walk, op, defs, memo, loops, guards)
        elif op.name == "scf.if":
            chance = Chance(build(op.operands[0], defs, memo))
            sides = (chance, Apply("sub", (Const(1.0), chance)))
            for region, weight in zip(op.regions, sides):
                _region(walk, region, defs, memo, loops, guards + (weight,))
        elif op.name == "tt.call":
            callee = walk.function.callees.get(re.match(r"\s*@([\w$.\-]+)", op.text).group(1))
            if callee is not None:
                inner = defs.new_child({a.ssa: Definition(why="an argument of a called function")
                                        for a in callee.args})
                _region(walk, callee.body, inner, memo.new_child(), loops, guards)
        else:
            walk.items += _op_items(op, defs, memo, loops, guards)


def _new_loop(walk: _Walk, kind: str, bounds: tuple[Expr, Expr, Expr], loops, guards, inclusive=False,
              expected=False) -> int:
    loop = Loop(len(walk.loops), kind, *bounds, loops[-1] if loops else None, guards, inclusive, expected)
    walk.loops.append(loop)
    return loop.id


def _for(walk: _Walk, op: Op, defs, memo, loops, guards) -> None:
    iv, lb, ub, st, inits, names = for_header(op)
    bounds = tuple(build(v, defs, memo) for v in (lb, ub, st))
    loop = _new_loop(walk, "for", bounds, loops, guards)
    inner = defs.new_child({iv: Definition(loop=loop), **{n: Definition(init=i) for n, i in zip(names, inits)}})
    _region(walk, op.regions[0], inner, memo.new_child(), loops + (loop,), guards)


def _while(walk: _Walk, op: Op, defs, memo, loops, guards) -> None:
    """A while loop: counted where it advances a counter by a fixed step to a bound (module docstring)."""
    header = re.match(r"\s*\((.*?)\)\s*:", op.text)
    pairs = [p.split("=") for p in split_top(header.group(1))] if header else []
    args = [p[0].strip().lstrip("%") for p in pairs]
    inits = [p[1].strip().lstrip("%") for p in pairs]
    before, after = op.regions[0], op.regions[1] if len(op.regions) > 1 else None
    counted = _counter(op, args, inits, before, after, defs, memo)
    if counted is None:
        bounds, inclusive, counter, expected = (Const(0.0), Unknown("a while loop's condition"), Const(1.0)), False, \
            None, False
    else:
        bounds, inclusive, counter, expected = counted
    loop = _new_loop(walk, "while", bounds, loops, guards, inclusive, expected)
    first = defs.new_child({a: Definition(init=i) for a, i in zip(args, inits)})
    _region(walk, before, first, memo.new_child(), loops + (loop,), guards)
    if after is not None and after.blocks:
        block_args = after.blocks[0].args
        second = defs.new_child({a: Definition(loop=loop) if a == counter else Definition(why="a while loop's value")
                                 for a in block_args})
        _region(walk, after, second, memo.new_child(), loops + (loop,), guards)


def _compares(cond_name: str, scope) -> list[Op]:
    """The integer compares a while loop's condition is (one, or the operands of an `arith.andi`)."""
    d = scope.get(cond_name)
    if d is None or d.op is None:
        return []
    if d.op.name == "arith.andi":
        return [c for o in d.op.operands[:2] for c in _compares(o, scope)]
    return [d.op] if d.op.name == "arith.cmpi" else []


def _range(upper: str, lower: str, scope, memo) -> tuple[Expr, Expr]:
    """(lower, upper) of a counter's condition `lower <= counter < upper`, as (0, width) where `upper` is
    `lower + width` (the lower bound is then often a value the call cannot give, carried by an outer loop)."""
    d = scope.get(upper)
    if d is not None and d.op is not None and d.op.name == "arith.addi" and lower in d.op.operands[:2]:
        width = next((o for o in d.op.operands[:2] if o != lower), lower)
        return Const(0.0), build(width, scope, memo)
    return build(lower, scope, memo), build(upper, scope, memo)


def _counter(op: Op, args, inits, before: Region, after: Region | None, defs, memo):
    """((lower, upper, step), inclusive, the counter's name in the body, expected) of a while loop whose condition is
    `counter < bound` (or <=, !=; with `and counter >= lower`) and whose body yields `counter + step`; None for any
    other. Where the condition bounds the counter from both sides, the loop is counted over that range (a counter
    entering it at any phase of its step makes range / step trips on average: a persistent loop's programs);
    else from the counter's initial value."""
    ops = before.ops
    if not ops or ops[-1].name != "scf.condition" or after is None or not after.blocks:
        return None
    scope, inner_memo = defs.new_child({a: Definition(init=i) for a, i in zip(args, inits)}), memo.new_child()
    for o in ops:
        _define(o, scope)
    compares = [c for c in _compares(ops[-1].operands[0], scope) if c.operands[0] in args]
    kinds = {c.text.split(",")[0].strip(): c for c in compares}
    below = next((kinds[p] for p in ("slt", "ult", "sle", "ule", "ne") if p in kinds), None)
    above = next((kinds[p] for p in ("sge", "uge", "sgt", "ugt") if p in kinds), None)
    passed = ops[-1].operands[1:]
    if below is None or below.operands[0] not in passed or (above and above.operands[0] != below.operands[0]):
        return None
    k = args.index(below.operands[0])
    counter = after.blocks[0].args[passed.index(below.operands[0])]
    yielded = after.blocks[0].ops[-1].operands if after.blocks[0].ops else ()
    advance = next((o for o in after.blocks[0].ops if k < len(yielded) and yielded[k] in o.results), None)
    if advance is None or advance.name != "arith.addi" or counter not in advance.operands:
        return None
    step = build(next(o for o in advance.operands if o != counter), defs, memo)
    if above is not None:
        lower, upper = _range(below.operands[1], above.operands[1], scope, inner_memo)
    else:
        lower, upper = build(inits[k], defs, memo), build(below.operands[1], scope, inner_memo)
    return (lower, upper, step), below.text.split(",")[0].strip() in ("sle", "ule"), counter, above is not None


def _successors(op: Op) -> list[str]:
    return re.findall(r"\^(\w+)", op.text)


def _region(walk: _Walk, region: Region, defs, memo, loops, guards) -> None:
    """A region's ops; with several blocks (an early `return`: `cf.cond_br`), each block weighed by the share of
    programs reaching it."""
    if len(region.blocks) <= 1:
        _ops(walk, region.ops, defs, memo, loops, guards)
        return
    reach: dict[str, Expr] = {region.blocks[0].label: Const(1.0)}
    for block in region.blocks:
        weight = reach.get(block.label)
        if weight is None:
            walk.notes.append(f"block ^{block.label} is reached by no branch before it: not counted")
            continue
        for a in block.args:
            defs[a] = Definition(why="a value merged from branches")
        _ops(walk, block.ops, defs, memo, loops, guards + (() if weight == Const(1.0) else (weight,)))
        last = block.ops[-1] if block.ops else None
        if last is not None and last.name == "cf.cond_br":
            chance = Chance(build(last.operands[0], defs, memo))
            taken, other = _successors(last)[:2]
            reach[taken] = _plus(reach.get(taken), _times(weight, chance))
            reach[other] = _plus(reach.get(other), _times(weight, Apply("sub", (Const(1.0), chance))))
        elif last is not None and last.name == "cf.br":
            target = _successors(last)[0]
            reach[target] = _plus(reach.get(target), weight)


def _argument_definitions(function: Function) -> dict[str, Definition]:
    """Each IR argument: the parameter it came from (a tensor descriptor's first argument; its shape and
    strides after it are unknown here)."""
    defs, seen = {}, set()
    for a in function.args:
        if a.param is None or a.param in seen:
            defs[a.ssa] = Definition(why="a tensor descriptor's shape or stride" if a.param else "an unnamed argument")
        else:
            defs[a.ssa] = Definition(param=a.param)
            seen.add(a.param)
    return defs


def read_work(function: Function) -> KernelWork:
    """The per-program work of `function` (a parsed TTIR function, kernels/introspect/ttir.py)."""
    walk = _Walk(function)
    _region(walk, function.body, ChainMap(_argument_definitions(function)), ChainMap(), (), ())
    notes = list(dict.fromkeys(walk.notes))
    masked = sum(item.masked for item in walk.items)
    if masked:
        notes.append(f"{masked} masked load/store op(s) counted as whole tiles (a mask's kept lanes are data)")
    notes += [loop.describe() for loop in walk.loops if not loop.known]
    return KernelWork(function.name, tuple(walk.items), tuple(walk.loops), tuple(notes))
