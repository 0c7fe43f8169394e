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
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom rooftune.tuner.cli import app\n"
            "r = CliRunner().invoke(app, ['--help'])\nassert r.exit_code == 0, r.output\n"
            "print('torch' in sys.modules, 'triton' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"
