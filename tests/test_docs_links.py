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
