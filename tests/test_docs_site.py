"""The README is a short front door whose links into the documentation site resolve, and the site's
reference pages are what the declarations generate (``scripts/docs_reference.py``).  The site's
own links are checked by ``mkdocs build --strict`` in scripts/test.sh."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "scripts/docs_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _anchors(page: Path) -> set[str]:
    """The ids the site gives a page's headings (the toc extension's default slugs)."""
    ids = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#{1,6} (.+)", line)
        if heading:
            text = re.sub(r"[^\w\s-]", "", heading.group(1).replace("`", "")).strip().lower()
            ids.add(re.sub(r"[\s-]+", "-", text))
    return ids


def test_the_readme_is_a_short_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    for section in ("## The two commands", "## What the first report shows", "## Where to go next"):
        assert section in text


def test_every_local_link_of_the_readme_resolves() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text(encoding="utf-8"))
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert any(link.startswith("docs/") for link in local), "the README links no docs page"
    broken = []
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        if not target.is_file():
            broken.append(f"{link}: no file {path}")
        elif anchor and anchor not in _anchors(target):
            broken.append(f"{link}: {path} has no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert pages and [p for p in pages if p not in nav] == []


def test_the_reference_pages_are_the_generated_ones() -> None:
    stale = _generator().stale()
    assert stale == [], f"stale: {stale}; run `python scripts/docs_reference.py`"


def test_a_page_that_no_longer_matches_its_declaration_is_found(tmp_path: Path) -> None:
    generator = _generator()
    out = tmp_path / "reference"
    shutil.copytree(ROOT / "docs/reference", out)
    page = out / "systems.md"
    # a preset of the paper renamed in the page only: the page no longer says what the code does
    page.write_text(page.read_text(encoding="utf-8").replace("`gpt_dev_parler`", "`gpt_dev`"))
    (out / "tasks.md").unlink()
    assert generator.stale(out) == ["tasks.md", "systems.md"]
    generator.write(out)
    assert generator.stale(out) == []
