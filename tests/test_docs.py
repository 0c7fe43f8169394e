"""The documentation's relative links resolve, and the README stays a front page (at most 250 lines)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250

# [text](target) and [text](target "title"); images too. Code spans are removed first.
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def doc_files() -> list[Path]:
    """README.md, docs/*.md and every README.md under experiments/, datasets/ and scripts/."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for folder in ("experiments", "datasets", "scripts"):
        files += sorted((REPO / folder).rglob("README.md"))
    return files


def relative_links(text: str) -> list[str]:
    """The link targets of Markdown text that point into the repository (no scheme, not a bare
    anchor), with any #anchor or ?query removed."""
    targets = []
    for target in _LINK.findall(_CODE.sub("", text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue
        targets.append(re.split(r"[#?]", target, maxsplit=1)[0])
    return targets


def broken_links(path: Path) -> list[str]:
    return [f"{path.relative_to(REPO)}: {target}" for target in relative_links(path.read_text())
            if not (path.parent / target).exists()]


def test_the_doc_files_exist():
    names = {str(p.relative_to(REPO)) for p in doc_files()}
    assert {"README.md", "docs/results.md", "docs/history.md", "docs/datasets.md",
            "experiments/README.md"} <= names


def test_every_relative_link_resolves():
    broken = [b for path in doc_files() for b in broken_links(path)]
    assert not broken, broken


def test_the_readme_is_a_front_page():
    lines = len((REPO / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES}"


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "there.md").write_text("x")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md) [ok too](there.md#a) [web](https://example.com) [anchor](#top)\n"
                    "`[in code](missing.md)` [gone](missing.md#part) ![picture](gone.png)\n")
    assert relative_links(page.read_text()) == ["there.md", "there.md", "missing.md", "gone.png"]
    assert [t for t in relative_links(page.read_text()) if not (tmp_path / t).exists()] == ["missing.md", "gone.png"]
