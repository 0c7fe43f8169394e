"""The import arrows of the project's layout hold: data flows hwprofiles -> candidates -> roofline /
kernels / eval -> tuner, imports are absolute, and torch/triton load at module level only in kernels/."""

import ast
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
