"""The install requirement admits the Triton releases rooftune supports (3.6 to the newest, which CI tests)
and the torch that pins each, with no upper bound that no tested break justifies."""

import re

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def _requirements() -> dict[str, Requirement]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {r.name: r for r in map(Requirement, deps)}


def test_triton_from_3_6_to_the_newest_ci_tests():
    newest = re.search(r"NEWEST_TRITON=(\S+)", (REPO / ".ci" / "run").read_text()).group(1)
    spec = _requirements()["triton"].specifier
    for version in ("3.6.0", "3.7.0", "3.7.1", "3.8.0", newest):
        assert spec.contains(Version(version)), version
    assert not spec.contains(Version("3.5.1"))


def test_torch_builds_that_pin_a_supported_triton_are_admitted():
    spec = _requirements()["torch"].specifier
    for version in ("2.11.0", "2.12.0", "2.13.0", "2.14.1", "2.15.0"):  # 2.11 pins Triton 3.6, 2.12-2.13 3.7
        assert spec.contains(Version(version)), version
