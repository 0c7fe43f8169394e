"""The import arrows of the project's layout hold: data flows hwprofiles -> candidates -> roofline /
kernels / eval -> tuner, imports are absolute, and torch/triton load at module level only in kernels/."""

import ast
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ["hwprofiles", "candidates", "roofline", "kernels", "eval", "tuner"]
ALLOWED = {
    "hwprofiles": {"hwprofiles"},
    "candidates": {"candidates", "hwprofiles"},
    "roofline": {"roofline", "candidates", "hwprofiles"},
    "kernels": {"kernels", "candidates", "hwprofiles"},
    "eval": {"eval", "candidates", "hwprofiles", "kernels", "roofline"},
    "tuner": set(PACKAGES),
}
HEAVY = {"torch", "triton"}


def _imports(path: Path):
    """(module name, is module level) for every import in a file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in top_level
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                yield "." * node.level + (node.module or ""), id(node) in top_level
            else:
                yield node.module, id(node) in top_level


def _sources():
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            yield package, path


def test_sources_exist():
    assert len(list(_sources())) > 10


def test_imports_follow_the_arrows():
    problems = []
    for package, path in _sources():
        rel = path.relative_to(REPO)
        for name, _ in _imports(path):
            root = name.split(".")[0]
            if name.startswith("."):
                problems.append(f"{rel}: relative import {name!r}; import absolutely from rooftune")
            elif root in PACKAGES:
                problems.append(f"{rel}: bare 'import {name}' gives a second module object; use rooftune.{name}")
            elif root == "rooftune" and name.count(".") >= 1:
                target = name.split(".")[1]
                if target in PACKAGES and target not in ALLOWED[package]:
                    problems.append(f"{rel}: {package} must not import rooftune.{target}")
    assert not problems, "\n".join(problems)


def test_torch_and_triton_load_at_module_level_only_in_kernels():
    problems = [
        f"{path.relative_to(REPO)} imports {name} at module level"
        for package, path in _sources() if package != "kernels"
        for name, module_level in _imports(path)
        if module_level and name.split(".")[0] in HEAVY
    ]
    assert not problems, "\n".join(problems)


def test_cli_help_does_not_import_torch():
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom rooftune.tuner.cli.app import app\n"
            "r = CliRunner().invoke(app, ['--help'])\nassert r.exit_code == 0, r.output\n"
            "print('torch' in sys.modules, 'triton' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


# Libraries a function may import where it needs them: the GPU stack (slow to load, absent or unusable on
# some machines) and the optional extras. Everything else is imported at the top of the file.
LAZY_LIBRARIES = {"torch", "triton", "pynvml", "matplotlib", "optuna", "nvMatmulHeuristics"}


def _module_name(path: Path) -> str:
    package, *rest = path.relative_to(REPO).with_suffix("").parts
    parts = ["rooftune"] + ([] if package == "rooftune" else [package]) + [p for p in rest if p != "__init__"]
    return ".".join(parts)


def _package_modules() -> dict[str, Path]:
    paths = [p for _, p in _sources()] + sorted((REPO / "rooftune").rglob("*.py"))
    return {_module_name(p): p for p in paths}


def _own_targets(name: str, node, modules: dict[str, Path]) -> list[str]:
    """The project's modules an import statement loads: `from rooftune.x import y` loads rooftune.x.y where
    that is a module, else rooftune.x."""
    if isinstance(node, ast.ImportFrom):
        found = [f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in modules]
        return found or ([name] if name in modules else [])
    return [name] if name in modules else []


def _import_graph():
    """module -> [(imported project module, at module level)], and module -> heavy libraries it loads at
    module level."""
    modules = _package_modules()
    edges, heavy = {}, {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        top_level = {id(node) for node in tree.body}
        edges[module], heavy[module] = [], set()
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or getattr(node, "level", 0):
                continue
            names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for name in names:
                if name.split(".")[0] == "rooftune":
                    edges[module] += [(t, id(node) in top_level) for t in _own_targets(name, node, modules)]
                elif id(node) in top_level and name.split(".")[0] in {"torch", "triton"}:
                    heavy[module].add(name.split(".")[0])
    return edges, heavy


def _loads_gpu_stack(edges, heavy) -> set[str]:
    """Modules that load torch or triton when imported (themselves or through a module-level import)."""
    loads = {m for m, libs in heavy.items() if libs}
    while True:
        more = {m for m, out in edges.items() if m not in loads and any(top and t in loads for t, top in out)}
        if not more:
            return loads
        loads |= more


def test_functions_import_only_the_gpu_stack_and_optional_extras():
    """An import inside a function is for torch, triton, NVML, an optional extra, or a module of the project
    that loads torch or triton itself: anything else goes at the top of the file, where a reader sees it
    and an import cycle cannot hide."""
    edges, heavy = _import_graph()
    gpu_modules = _loads_gpu_stack(edges, heavy)
    problems = []
    for module, path in _package_modules().items():
        if module == "rooftune":  # its module __getattr__ (PEP 562) keeps `import rooftune` light by design
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in top_level:
                continue
            names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for name in names:
                root = name.split(".")[0]
                if root == "rooftune":
                    targets = _own_targets(name, node, _package_modules())
                    if not targets or any(t not in gpu_modules for t in targets):
                        problems.append(f"{path.relative_to(REPO)}:{node.lineno} imports {name} inside a function")
                elif root not in LAZY_LIBRARIES:
                    problems.append(f"{path.relative_to(REPO)}:{node.lineno} imports {name} inside a function")
    assert not problems, f"{len(problems)}:\n" + "\n".join(problems)


def test_no_import_cycles():
    edges, _ = _import_graph()
    graph = {m: {t for t, _ in out if t != m} for m, out in edges.items()}
    # a package imports its own modules' names in __init__: an edge from a module to its package is no cycle
    # when the package's __init__ is all that runs
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)


# --- the size of a function, and private names -------------------------------------------------------

MAX_FUNCTION_LINES = 60  # any function of the package but a Triton kernel
MAX_CLI_FUNCTION_LINES = 40  # a command and the helpers it parses and prints with (tuner/cli/)
SIZE_PACKAGES = ["hwprofiles", "candidates", "roofline", "kernels", "eval", "tuner", "rooftune"]


def _own_files(packages):
    """The package's own files under `packages` (rooftune/'s links to the other folders not followed twice)."""
    for package in packages:
        for path in sorted((REPO / package).rglob("*.py")):
            if not any(part.is_symlink() for part in [path, *path.parents] if REPO in part.parents):
                yield path


def _triton_kernel(node) -> bool:
    return any("jit" in ast.unparse(d) for d in node.decorator_list)


def _long_functions(paths, limit: int, skip=lambda node: False) -> list[str]:
    """'file:line name (n lines)' of each function in `paths` longer than `limit` lines (from `def` to its end)."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not skip(node):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)" if REPO not in path.parents
                                 else f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_60_lines_but_triton_kernels():
    long = _long_functions(_own_files(SIZE_PACKAGES), MAX_FUNCTION_LINES, skip=_triton_kernel)
    assert not long, "\n".join(long)


def test_the_cli_is_thin_no_command_function_over_40_lines():
    cli = sorted((REPO / "tuner" / "cli").glob("*.py"))
    commands = [n for p in cli for n in ast.walk(ast.parse(p.read_text()))
                if isinstance(n, ast.FunctionDef) and any(".command" in ast.unparse(d) for d in n.decorator_list)]
    assert len(commands) > 10  # the scan sees the Typer commands
    long = _long_functions(cli, MAX_CLI_FUNCTION_LINES)
    assert not long, "\n".join(long)


def test_the_size_scans_find_what_they_look_for(tmp_path):
    source = tmp_path / "m.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    source.write_text(f"@triton.jit\ndef kernel():\n{body}\n\ndef helper():\n{body}\n\n"
                      f"def short():\n    return 1\n")
    assert _long_functions([source], MAX_FUNCTION_LINES, skip=_triton_kernel) == ["m.py:65 helper (62 lines)"]


def _private_uses(path: Path, modules: dict[str, Path], text: str | None = None) -> list[str]:
    """Each private name (`_name`, not a dunder) `path` (its `text`, by default the file's) takes from another
    module of the package: `from rooftune.x import _y`, or `module._y` on a module it imported."""
    me = _module_name(path)
    tree = ast.parse(path.read_text() if text is None else text, filename=str(path))
    aliases, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rooftune"):
            for alias in node.names:
                if f"{node.module}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif _private(alias.name) and node.module != me:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("rooftune") and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                and aliases.get(node.value.id, me) != me):
            found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_is_imported_across_modules():
    modules = _package_modules()
    found = [use for path in modules.values() for use in _private_uses(path, modules)]
    assert not found, "\n".join(found)


def test_the_private_name_scan_finds_both_forms():
    path = REPO / "tuner" / "cli" / "app.py"
    text = ("from rooftune.kernels.gemm import _int_class\nfrom rooftune.kernels import gemm as kgemm\n"
            "from rooftune import __version__\nkgemm._dims(1, 2)\nkgemm.gemm_dims(1, 2)\nkgemm.__name__\n")
    assert [u.split(" ", 1)[1] for u in _private_uses(path, _package_modules(), text)] == [
        "from rooftune.kernels.gemm import _int_class", "kgemm._dims"]


# --- docs/architecture.md is drawn from the code --------------------------------------------------------

ARCHITECTURE = REPO / "docs" / "architecture.md"


def _diagram_arrows() -> set[tuple[str, str]]:
    """(A, B) for each `A -> B` of the diagram, the first fenced block of docs/architecture.md: B imports A."""
    block = ARCHITECTURE.read_text().split("```")[1]
    arrows = set()
    for line in block.strip().splitlines():
        names = [n.strip().split(" ")[0] for n in re.split(r"-+>", line)]
        arrows |= set(zip(names, names[1:]))
    return arrows


def _room_imports() -> set[tuple[str, str]]:
    """(A, B) for each top-level package A that a module of package B imports (B != A)."""
    found = set()
    for package, path in _sources():
        for name, _ in _imports(path):
            parts = name.split(".")
            if parts[0] == "rooftune" and len(parts) > 1 and parts[1] in PACKAGES and parts[1] != package:
                found.add((parts[1], package))
    return found


def _reach(arrows: set[tuple[str, str]]) -> set[tuple[str, str]]:
    closure = set(arrows)
    while True:
        more = {(a, d) for a, b in closure for c, d in closure if b == c} - closure
        if not more:
            return closure
        closure |= more


def test_the_diagram_draws_the_imports():
    """Every arrow of the diagram is an import the code has, and every import between two rooms follows a path
    of arrows; the rooms the arrows allow are the rooms ALLOWED allows."""
    arrows, imports = _diagram_arrows(), _room_imports()
    assert {n for arrow in arrows for n in arrow} == set(PACKAGES)
    assert not arrows - imports, f"drawn, not imported: {sorted(arrows - imports)}"
    assert not imports - _reach(arrows), f"imported, no path drawn: {sorted(imports - _reach(arrows))}"
    drawn = {b: {a for a, c in _reach(arrows) if c == b} | {b} for b in PACKAGES}
    assert drawn == {b: ALLOWED[b] for b in PACKAGES}


def test_a_diagram_without_an_import_fails():
    arrows = _diagram_arrows() - {("kernels", "eval")}
    assert ("kernels", "eval") not in _reach(arrows) and ("kernels", "eval") in _room_imports()


def _room_table() -> dict[str, list[str]]:
    """folder -> the modules (and file patterns) its row of the rooms table names, relative to the folder."""
    text = ARCHITECTURE.read_text()
    table = text[text.index("## The rooms"):].split("\n## ")[0]
    rooms = {}
    for line in table.splitlines():
        cells = line.split("|")
        if len(cells) > 3 and cells[1].strip().startswith("`"):
            rooms[cells[1].strip().strip("`")] = [n for n in re.findall(r"`([^`\s]+)`", cells[3])
                                                  if n.endswith((".py", ".json"))]
    return rooms


def test_every_module_the_rooms_table_names_exists_and_none_is_missing():
    rooms = _room_table()
    missing = [f"{folder}{name}" for folder, names in rooms.items() for name in names
               if not list((REPO / folder).glob(name))]
    assert not missing, f"named in docs/architecture.md, not in the code: {missing}"
    folders = {str(p.parent.relative_to(REPO)) + "/" for p in _own_files(SIZE_PACKAGES)}
    assert folders <= set(rooms), f"rooms without a row: {sorted(folders - set(rooms))}"
    unnamed = [str(p.relative_to(REPO)) for p in _own_files(SIZE_PACKAGES) if p.name != "__init__.py"
               and p.name not in rooms[str(p.parent.relative_to(REPO)) + "/"]]
    assert not unnamed, f"modules the rooms table does not name: {unnamed}"
