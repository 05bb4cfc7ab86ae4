"""Build README.md and the documentation pages that show real output from their sources: README.md from
docs/README.in.md, and every other docs/**/NAME.in.md into NAME.md beside it (the site's mkdocs.yml leaves the
sources out). In a source, each <<name>> is replaced by tests/golden/<name>.txt (real output) and <<fidelity>> by
`benchmarks/tpot_fidelity.py`'s table. Run after regenerating the golden files
(`KVPLAN_UPDATE_GOLDEN=1 pytest tests/test_golden.py -k "not readme"`); tests/test_golden.py checks that every
built page equals what this builds from its source and the goldens now."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"<<([a-z0-9.-]+)>>")


def pages(root: Path = ROOT) -> list[tuple[Path, Path]]:
    """(source, built page) for the README and every docs page built from a source."""
    docs = root / "docs"
    built = [(source, source.with_name(source.name.removesuffix(".in.md") + ".md"))
             for source in sorted(docs.rglob("*.in.md")) if source != docs / "README.in.md"]
    return [(docs / "README.in.md", root / "README.md"), *built]


def build(source: Path, root: Path = ROOT) -> str:
    """The page ``source`` builds to: its markers filled from the goldens (and the fidelity table), under a comment
    (shown by neither GitHub nor MkDocs) naming the source to edit."""
    fidelity: list[str] = []

    def fill(m: re.Match) -> str:
        name = m.group(1)
        if name == "fidelity":
            if not fidelity:
                fidelity.append(subprocess.run([sys.executable, str(root / "benchmarks" / "tpot_fidelity.py")],
                                               check=True, capture_output=True, text=True, cwd=root
                                               ).stdout.rstrip("\n"))
            return fidelity[0]
        return (root / "tests" / "golden" / f"{name}.txt").read_text()

    notice = (f"<!-- Built by tools/build_readme.py from {source.relative_to(root).as_posix()} and tests/golden/: "
              "edit the source, not this file. -->\n")
    return notice + MARKER.sub(fill, source.read_text())


def main() -> int:
    for source, page in pages():
        page.write_text(build(source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
