"""The README's links and the documentation site (mkdocs.yml, docs/): every relative link names a file of the
repository and, with a ``#fragment``, a heading of that file; the site's configuration fails its build on a
broken link or anchor, and its navigation lists every page. CI builds the site itself (``mkdocs build
--strict`` in .ci/run); where mkdocs is installed, a test here builds it too."""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a ``# comment`` in a bash block is not a heading, ``[x](y)`` in code
    is not a link)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def _heading_texts(text: str) -> list[str]:
    """The headings' text as rendered: links by their text, code spans, emphasis and escapes unwrapped."""
    titles = re.findall(r"^#{1,6} +(.+?) *#* *$", _prose(text), flags=re.M)
    return [re.sub(r"\\(.)", r"\1", re.sub(r"[`*]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t)))
            for t in titles]


def github_slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, each space a ``-``."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def mkdocs_slug(title: str) -> str:
    """Python-Markdown's (MkDocs's) anchor of a heading: ASCII only, punctuation but ``-`` and ``_`` dropped,
    each run of spaces and ``-`` one ``-``."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _anchors(path: Path, slug) -> set[str]:
    """Every anchor of a Markdown file's headings, a repeated one numbered as both renderers do (``x``, ``x-1``,
    ``x_1``)."""
    seen: dict[str, int] = {}
    anchors = set()
    for title in _heading_texts(path.read_text()):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.add(base if n == 0 else f"{base}-{n}")
        anchors.add(base if n == 0 else f"{base}_{n}")
    return anchors


def broken_links(page: Path, slug, within: Path) -> list[str]:
    """The relative links of ``page`` whose file is missing (or outside ``within``) or whose anchor is not a
    heading of it."""
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if "://" in target or target.startswith("mailto:"):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page.resolve()
        if not path.is_relative_to(within.resolve()) or not path.is_file():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path, slug):
            broken.append(target)
    return broken


def test_the_slugs_are_the_renderers():
    # hand-worked: GitHub keeps each hyphen and space; Python-Markdown folds runs and drops non-ASCII
    assert github_slug("Set-up: a virtual environment and two commands") == \
        "set-up-a-virtual-environment-and-two-commands"
    assert github_slug("(C) kvplan against the points") == "c-kvplan-against-the-points"
    assert github_slug("Settings side by side: --compare") == "settings-side-by-side---compare"
    assert mkdocs_slug("Settings side by side: --compare") == "settings-side-by-side-compare"
    assert mkdocs_slug("8 × H200") == "8-h200" and github_slug("8 × H200") == "8--h200"


def test_every_readme_link_resolves_to_a_file_and_anchor_of_the_repository():
    """README.md's relative links (docs/workload.md, the docs site's pages, ARCHITECTURE.md) name files of the
    repository, and each ``#anchor`` a heading of that file as GitHub names it."""
    readme = ROOT / "README.md"
    targets = LINK.findall(_prose(readme.read_text()))
    assert "docs/workload.md" in targets and any("#" in t for t in targets)
    assert not broken_links(readme, github_slug, ROOT), broken_links(readme, github_slug, ROOT)


def test_a_broken_link_or_anchor_is_found(tmp_path):
    # the check itself: a missing file, a missing anchor and a file outside the tree are reported, a good one not
    (tmp_path / "a.md").write_text("# Title: one\n\n## Two\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](a.md#title-one) [ok](a.md#two) [no](b.md) [no](a.md#three) [no](../x.md)\n\n"
                    "```\n[code](not-a-link.md)\n```\n")
    assert broken_links(page, github_slug, tmp_path) == ["b.md", "a.md#three", "../x.md"]


def _pages() -> list[Path]:
    return [p for p in sorted(DOCS.rglob("*.md")) if not p.name.endswith(".in.md")]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_every_docs_link_resolves_inside_the_site(page):
    """A docs page links only to pages of the site (a link out of docs/ would be broken on the site), and each
    anchor to a heading as MkDocs names it."""
    assert not broken_links(page, mkdocs_slug, DOCS), broken_links(page, mkdocs_slug, DOCS)


def _config() -> str:
    return (ROOT / "mkdocs.yml").read_text()


def test_the_site_fails_its_build_on_a_broken_link_anchor_or_page():
    config = _config()
    assert re.search(r"^docs_dir: docs$", config, flags=re.M) and re.search(r"^strict: true$", config, flags=re.M)
    validation = config.split("\nvalidation:\n", 1)[1].split("\nnav:", 1)[0]
    for key in ("omitted_files", "not_found", "absolute_links", "anchors", "unrecognized_links"):
        assert re.search(rf"^ +{key}: warn$", validation, flags=re.M), key
    assert re.search(r"^exclude_docs: \|\n +\*\.in\.md$", config, flags=re.M)   # the sources are not pages


def test_the_nav_lists_every_page_once():
    nav = re.findall(r"^ *- (?:[^:\n]+: )?([\w./-]+\.md)$", _config().split("\nnav:\n", 1)[1], flags=re.M)
    pages = sorted(str(p.relative_to(DOCS)) for p in _pages())
    assert sorted(nav) == pages, set(nav) ^ set(pages)
    assert nav[0] == "index.md"


def test_the_ci_builds_the_site_with_mkdocs_pinned():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r'^pip install (-q )?"\.\[docs\]"$', ci, flags=re.M)
    assert re.search(r'^mkdocs build --strict --site-dir "\$\(mktemp -d\)"$', ci, flags=re.M)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^docs = \["mkdocs==1\.6\.1"\]$', pyproject, flags=re.M)


def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "site" / "commands" / "simulate" / "index.html").is_file()
