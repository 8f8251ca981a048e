"""The manual holds together: every relative link in the README and docs/ reaches a file (and a heading, when it
names one), and every page of docs/ is one click from the README."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
PAGES += [REPO / "docker" / "README.md", REPO / "datasets" / "README.md", REPO / "tests" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slugs(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    in_code = False
    for line in page.read_text().splitlines():
        in_code ^= line.startswith("```")
        if not in_code and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_every_relative_link_reaches_its_file_and_heading():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in slugs(file):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_one_click_from_the_readme():
    linked = {(REPO / t.partition("#")[0]).resolve() for t in LINK.findall((REPO / "README.md").read_text())}
    unreachable = [p.name for p in sorted((REPO / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not unreachable, f"docs pages the README does not link: {unreachable}"


#: Where code sends a reader: a page's anchor (``docs/running.md#threads-and-kernels``) or a page and a section's
#: title (``docs/analysis.md, "Aggregations"``; ``README.md ("Record schema")``; ``README, 'Time limits'``).
CODE_ROOTS = ("orchestrator", "contract", "methods", "nodeground", "docker")
ANCHOR = re.compile(r"((?:docs/)?[\w-]+\.md)#([\w-]+)")
SECTION = re.compile(r"((?:docs/)?[\w-]+\.md|README)`{0,2},? \(?[\"']([A-Z][^\"'\n]*)[\"']")


def code_pointers() -> list[tuple[str, Path, str, bool]]:
    """(where, page, anchor, exact) for every pointer to a doc section in the product's code and manifests; a
    section named by its title (not exact) may leave off the heading's tail (``"Aggregations"``)."""
    found = []
    for root in CODE_ROOTS:
        for path in sorted((REPO / root).rglob("*")):
            if path.suffix not in (".py", ".toml", ".tmpl") or not path.is_file():
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                where = f"{path.relative_to(REPO)}:{number}"
                for page, anchor in ANCHOR.findall(line):
                    found.append((where, _page(page), anchor, True))
                for page, title in SECTION.findall(line):
                    slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
                    found.append((where, _page(page), slug, False))
    return found


def _page(name: str) -> Path:
    """A page as code names it: from the repository root, or a docs/ page by its file name alone."""
    name = "README.md" if name == "README" else name
    return REPO / name if (REPO / name).exists() or "/" in name else REPO / "docs" / name


def test_every_pointer_in_code_reaches_its_page_and_section():
    pointers = code_pointers()
    assert len(pointers) >= 10, "the scan finds the code's pointers"
    broken = [
        f"{where}: {page.relative_to(REPO)}#{anchor}"
        + (" (no such file)" if not page.exists() else " (no such heading)")
        for where, page, anchor, exact in pointers
        if not page.exists() or not any(s == anchor or (not exact and s.startswith(anchor + "-")) for s in slugs(page))
    ]
    assert not broken, "\n".join(broken)
