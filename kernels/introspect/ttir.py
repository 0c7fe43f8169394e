"""Triton IR text (`CompiledKernel.asm['ttir']`, MLIR) read into functions, regions, blocks and ops: plain data.

The parser reads what Triton prints, one op per line: `%r = dialect.op operands attributes : types`, an op with
regions ending its line with `{` (`scf.for`, `scf.if`, `scf.while`, the generic `"tt.reduce"(...) ({`), a region
closed by `}` (`} else {`, `} do {`, `}) : (types) -> type` for a generic op, whose types follow), blocks opened by
`^bb1:` or `^bb0(%a: f32, ...):`. Source locations (`loc(...)`) are dropped, except each function argument's,
which names the Python parameter it came from (a tensor descriptor's argument is several IR arguments of one
name: the descriptor, then its shape and strides). Anything else on a line stays in `Op.text`, which the counting
(kernels/introspect/work.py) reads types and attributes from. No Triton import: this is text in, data out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SSA_REF = re.compile(r"%([\w$.\-]+(?:#\d+)?)")
_RESULTS = re.compile(r"^(%[\w$.\-]+(?::\d+)?(?:\s*,\s*%[\w$.\-]+(?::\d+)?)*)\s*=\s*(.*)$")
_OP_NAME = re.compile(r'^("[\w.]+"|[\w.]+)(.*)$')
_BLOCK = re.compile(r"^\^(\w+)(?:\((.*)\))?:")
_LOC_NAME = re.compile(r'loc\("([^"]+)"')
_FUNC = re.compile(r"tt\.func\s+(?:public\s+|private\s+)?@([\w$.\-]+)\s*\(")
# Element types by width in bytes; i1 is stored as a byte. fp8 types are f8E4M3FN, f8E5M2, ... (one byte).
_WIDTHS = {"i1": 1, "bf16": 2, "f16": 2, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "index": 8}


class TtirError(ValueError):
    """Text that is not Triton IR the parser can read."""


@dataclass(frozen=True)
class TensorType:
    """A tensor type's shape and element: 'bf16', 'f32', 'i32', ...; `pointee` for a tensor of pointers."""

    shape: tuple[int, ...]
    element: str
    pointee: str | None = None

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class Op:
    """One operation: its name ('tt.load'), the SSA values it defines (`%acc:3` defines 'acc#0'..'acc#2'), the
    values it reads, its text without locations (operands, attributes, types), its regions, and for an op with
    regions the text after the last region closes (a generic op's types)."""

    name: str
    results: tuple[str, ...]
    operands: tuple[str, ...]
    text: str
    regions: tuple[Region, ...] = ()
    tail: str = ""


@dataclass(frozen=True)
class Block:
    label: str
    args: tuple[str, ...]
    ops: tuple[Op, ...]


@dataclass(frozen=True)
class Region:
    blocks: tuple[Block, ...]

    @property
    def ops(self) -> tuple[Op, ...]:
        """The ops of the region's first block (structured regions have one)."""
        return self.blocks[0].ops if self.blocks else ()


@dataclass(frozen=True)
class Argument:
    """A function argument: its SSA name, its type, and the Python parameter it came from (its location's name)."""

    ssa: str
    type: str
    param: str | None


@dataclass(frozen=True)
class Function:
    name: str
    args: tuple[Argument, ...]
    body: Region
    callees: dict[str, Function] = field(default_factory=dict, compare=False)


# --- text helpers ---------------------------------------------------------------------------------------

def _balanced_end(text: str, start: int, open_: str = "(", close: str = ")") -> int:
    """Index just past the bracket closing the one at `start` (strings skipped)."""
    depth, i, quoted = 0, start, False
    while i < len(text):
        c = text[i]
        if c == '"' and text[i - 1] != "\\":
            quoted = not quoted
        elif not quoted and c == open_:
            depth += 1
        elif not quoted and c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise TtirError(f"unbalanced {open_}{close} in: {text[:120]}")


def strip_locations(line: str) -> str:
    """`line` without its `loc(...)` parts."""
    out, i = [], 0
    while (j := line.find("loc(", i)) >= 0:
        if j > 0 and (line[j - 1].isalnum() or line[j - 1] in "_#"):
            out.append(line[i:j + 4])
            i = j + 4
            continue
        out.append(line[i:j].rstrip() if line[j - 1:j] == " " else line[i:j])
        i = _balanced_end(line, j + 3)
    out.append(line[i:])
    return "".join(out).rstrip()


def split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` outside brackets and strings."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, c in enumerate(text):
        if c == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def tensor_types(text: str) -> list[TensorType]:
    """Every `tensor<...>` type in `text`, in order (a TTGIR encoding after a comma is ignored)."""
    found, i = [], 0
    while (j := text.find("tensor<", i)) >= 0:
        end = _balanced_end(text, j + 6, "<", ">")
        body = split_top(text[j + 7:end - 1])[0]
        dims = []
        while (m := re.match(r"(\d+)x", body)) is not None:
            dims.append(int(m.group(1)))
            body = body[m.end():]
        pointee = re.match(r"!tt\.ptr<(.+)>$", body)
        found.append(TensorType(tuple(dims), "ptr" if pointee else body, pointee.group(1) if pointee else None))
        i = end
    return found


def element_bytes(element: str) -> int:
    """Bytes of one element of an MLIR type: 'bf16' 2, 'f8E4M3FN' 1, '!tt.ptr<f32>' 8 (a pointer)."""
    if element in _WIDTHS:
        return _WIDTHS[element]
    if element.startswith("f8") or element.startswith("i8"):
        return 1
    if element.startswith("!tt.ptr") or element == "ptr":
        return 8
    m = re.match(r"[if](\d+)$", element)
    if m:
        return max(1, int(m.group(1)) // 8)
    raise TtirError(f"unknown element type {element!r}")


def scalar_pointee(text: str) -> str | None:
    """The element a scalar `!tt.ptr<T>` type in `text` points to (None where there is none)."""
    m = re.search(r"!tt\.ptr<([^>]+(?:<[^>]*>)?)>", text)
    return m.group(1) if m else None


# --- parsing ---------------------------------------------------------------------------------------------

def _result_names(spec: str) -> tuple[str, ...]:
    names = []
    for part in spec.split(","):
        name, _, count = part.strip().lstrip("%").partition(":")
        names += [f"{name}#{i}" for i in range(int(count))] if count else [name]
    return tuple(names)


def _parse_op(line: str) -> tuple[str, tuple[str, ...], str]:
    """(op name, results, the rest of the line) of an op line."""
    results: tuple[str, ...] = ()
    m = _RESULTS.match(line)
    if m:
        results, line = _result_names(m.group(1)), m.group(2)
    n = _OP_NAME.match(line)
    if n is None:
        raise TtirError(f"not an op: {line[:120]}")
    return n.group(1).strip('"'), results, n.group(2)


@dataclass
class _Open:
    """An op whose regions are being read."""

    name: str
    results: tuple[str, ...]
    text: str
    regions: list = field(default_factory=list)
    blocks: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    label: str = "entry"
    args: tuple[str, ...] = ()

    def end_block(self) -> None:
        if self.ops or self.label != "entry" or self.args:
            self.blocks.append(Block(self.label, self.args, tuple(self.ops)))
        self.ops, self.label, self.args = [], "entry", ()

    def end_region(self) -> None:
        self.end_block()
        self.regions.append(Region(tuple(self.blocks)))
        self.blocks = []

    def op(self, tail: str = "") -> Op:
        operands = tuple(SSA_REF.findall(self.text))
        return Op(self.name, self.results, operands, self.text, tuple(self.regions), tail)


def _read_body(lines: list[str]) -> Region:
    """The function body's lines (after the `tt.func` line, up to its closing `}`) as a region."""
    stack = [_Open("tt.func", (), "")]
    for raw in lines:
        line = strip_locations(raw).strip()
        if not line or line.startswith("//"):
            continue
        top = stack[-1]
        if line.startswith("}"):
            top.end_region()
            rest = line[1:].strip()
            if rest.endswith("{"):               # `} else {`, `} do {`: the op's next region
                continue
            stack.pop()
            tail = rest[1:].strip() if rest.startswith(")") else rest
            stack[-1].ops.append(top.op(tail))
            continue
        block = _BLOCK.match(line)
        if block:
            top.end_block()
            top.label = block.group(1)
            top.args = tuple(a.split(":")[0].strip().lstrip("%") for a in split_top(block.group(2) or ""))
            continue
        name, results, rest = _parse_op(line)
        if line.endswith("{"):
            stack.append(_Open(name, results, rest[:-1].rstrip().removesuffix("(").rstrip()))
            continue
        top.ops.append(Op(name, results, tuple(SSA_REF.findall(rest)), rest))
    if len(stack) != 1:
        raise TtirError("a region is not closed")
    stack[0].end_region()
    return stack[0].regions[0]


def _arguments(signature: str) -> tuple[Argument, ...]:
    args = []
    for part in split_top(signature):
        loc = _LOC_NAME.search(part)
        clean = strip_locations(part)
        ssa, _, typ = clean.partition(":")
        typ = re.sub(r"\s*\{.*\}$", "", typ.strip())
        args.append(Argument(ssa.strip().lstrip("%"), typ, loc.group(1) if loc else None))
    return tuple(args)


def parse_ttir(text: str) -> Function:
    """The public function of a TTIR module (its body and arguments), with the other functions it calls
    (`tt.call`) in `callees`. Raises TtirError where the text cannot be read."""
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    functions, public = {}, None
    i = 0
    while i < len(lines):
        m = _FUNC.search(lines[i])
        if m is None:
            i += 1
            continue
        open_at = lines[i].index("(", m.end() - 1)
        signature = lines[i][open_at + 1:_balanced_end(lines[i], open_at) - 1]
        depth, j = 1, i + 1
        while j < len(lines) and depth:
            stripped = strip_locations(lines[j]).strip()
            depth += stripped.endswith("{") - stripped.startswith("}")
            j += 1
        functions[m.group(1)] = Function(m.group(1), _arguments(signature), _read_body(lines[i + 1:j - 1]))
        if public is None or " public " in lines[i]:
            public = m.group(1)
        i = j
    if public is None:
        raise TtirError("no tt.func in the text")
    main = functions[public]
    main.callees.update({k: v for k, v in functions.items() if k != public})
    return main
