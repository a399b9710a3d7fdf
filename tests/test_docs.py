"""The README and the pages under docs/: every relative link names a file of the repository, and
every ``#anchor`` a heading of the page it points to (GitHub's slugs), so moving or renaming a
page or a section cannot leave a dead link behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def github_slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(github_slug(line.lstrip("#")))
    return found


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_slug_rule():
    assert github_slug(" Reproducing DOGI (fast26)") == "reproducing-dogi-fast26"
    assert github_slug(" ZNS replay harness (`dogi_ml/zns`)") == "zns-replay-harness-dogi_mlzns"
    assert github_slug(" MINOS oracles") == "minos-oracles"


def test_the_readme_indexes_every_docs_page():
    readme_links = {(ROOT / t.split("#")[0]).resolve() for t in relative_links(ROOT / "README.md")}
    for page in PAGES[1:]:
        assert page.resolve() in readme_links, f"{page.name} is not linked from the README's Documentation table"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    links = relative_links(page)
    for target in links:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: link to {target!r}: {dest} does not exist"
        if anchor:
            assert dest.suffix == ".md", f"{page.name}: anchor on a non-Markdown target {target!r}"
            assert anchor in anchors(dest), f"{page.name}: no heading gives #{anchor} in {dest.name}"
