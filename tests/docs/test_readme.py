"""The README is the front door: its tables list exactly what `dpgym list` lists, every relative
link in it and in docs/*.md resolves, the docs teach only the public API, and it stays short.

The listing comes from the registry, as `dpgym list` builds it (no subprocess). Only dpgym's own
plugins count: a plugin package installed beside it is not the README's to list.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from dpgym.registry import PLUGINS_ENV, Registry

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 160
# README section (a `## ` heading starting with this word) holding each kind's table
SECTIONS = {"generator": "Generators", "learner": "Learners", "dataset": "Datasets", "metric": "Metrics"}

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
BACKTICKED = re.compile(r"`([^`]+)`")
BRACES = re.compile(r"\{([^{}]*)\}")


@pytest.fixture(scope="module")
def listed() -> dict[str, dict[str, object]]:
    """What `dpgym list` shows of dpgym's own plugins: kind -> name -> spec."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(PLUGINS_ENV, raising=False)  # test plugins are not part of the listing
        registry = Registry.discover()
    return {kind: {name: provided.spec for name, provided in registry.kinds[kind].items()
                   if provided.package.split(" ")[0] == "dpgym"}
            for kind in SECTIONS}


def section(text: str, title: str) -> str:
    """The body of the `## ` section whose heading starts with `title`."""
    match = re.search(rf"^## {re.escape(title)}\b.*?$(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def table_rows(body: str) -> list[list[str]]:
    """The cells of each body row of the markdown tables in `body` (header and rule skipped)."""
    rows, previous = [], ""
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("|") and not re.fullmatch(r"\|[\s:|-]+\|", line) and previous.startswith("|"):
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip("|"))])
        previous = line
    return rows


def expand(pattern: str) -> list[str]:
    """`a_{x,y}_b{1,2}` -> a_x_b1, a_x_b2, a_y_b1, a_y_b2 (shell-style brace expansion)."""
    parts = BRACES.split(pattern)  # literal, alternatives, literal, ...
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(combo) for combo in itertools.product(*choices)]


def readme_names(kind: str) -> set[str]:
    """Names in the first column of the README's table of `kind`, without a `:argument`."""
    rows = table_rows(section(README.read_text(), SECTIONS[kind]))
    assert rows, f"README.md's {SECTIONS[kind]} section has no table"
    return {token.split(":")[0] for row in rows for token in BACKTICKED.findall(row[0])}


@pytest.mark.parametrize("kind", ["generator", "learner", "dataset", "metric"])
def test_readme_table_matches_dpgym_list(kind: str, listed: dict[str, dict[str, object]]) -> None:
    in_readme, installed = readme_names(kind), set(listed[kind])
    assert not installed - in_readme, f"`dpgym list` shows {kind}s the README does not: {sorted(installed - in_readme)}"
    assert not in_readme - installed, f"the README lists {kind}s `dpgym list` does not: {sorted(in_readme - installed)}"


def test_readme_metric_values_match_dpgym_list(listed: dict[str, dict[str, object]]) -> None:
    rows = table_rows(section(README.read_text(), SECTIONS["metric"]))
    for row in rows:
        (name,) = BACKTICKED.findall(row[0])
        if name not in listed["metric"]:
            continue  # reported by the name check
        listed_values = row[1].split(": ")[0]  # "`a` ↑, `b` ↓: what they measure"
        values = {value for token in BACKTICKED.findall(listed_values) for value in expand(token)}
        declared = set(listed["metric"][name].directions)
        assert values == declared, (f"metric {name}: the README lists values {sorted(values - declared)} it does not "
                                    f"have, and misses {sorted(declared - values)}")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.MULTILINE)}


def _links(path: Path) -> list[str]:
    text = CODE_SPAN.sub("code", FENCE.sub("", path.read_text()))
    return [m.group(1) for m in LINK.finditer(text)]


DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(document: Path) -> None:
    broken = []
    for link in _links(document):
        if re.match(r"^[a-z][a-z0-9+.-]*:", link, re.IGNORECASE):  # http:, https:, mailto:
            continue
        target_text, _, fragment = link.partition("#")
        target = (document.parent / target_text).resolve() if target_text else document
        if not target.exists():
            broken.append(f"{link} (no such file)")
        elif fragment and target.suffix == ".md" and fragment not in _anchors(target):
            broken.append(f"{link} (no heading for #{fragment} in {target.relative_to(ROOT)})")
        elif target_text and ROOT not in target.parents and target != ROOT:
            broken.append(f"{link} (outside the repository)")
    assert not broken, f"{document.relative_to(ROOT)}: broken relative links: {broken}"


# Besides the names `dpgym` and the privacy toolkit export, the only modules a plugin may import
# (docs/plugins.md).
PLUGIN_MODULES = {"testing", "plugins"}
DOTTED_DPGYM = re.compile(r"\bdpgym\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_use_only_the_public_api(document: Path) -> None:
    """Every `dpgym.X` a page names or imports is a public name, `dpgym.privacy.Y` a name of the privacy
    toolkit, or `dpgym.testing` or `dpgym.plugins.*`: the docs never teach a plugin to reach into the
    harness's internal modules."""
    import dpgym
    import dpgym.privacy

    public = {*dpgym.__all__, "__version__", *PLUGIN_MODULES}
    internal = sorted({match.group(0) for match in DOTTED_DPGYM.finditer(document.read_text())
                       if (match.group(1) != "privacy" and match.group(1) not in public)
                       or (match.group(1) == "privacy" and match.group(2) not in (None, *dpgym.privacy.__all__))})
    assert not internal, (f"{document.relative_to(ROOT)} names dpgym internals {internal}: use `from dpgym import X`, "
                          "`from dpgym.privacy import Y`, or `dpgym.X` (harness/__init__.pyi, harness/privacy/__init__.pyi)")


def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; keep it at most {MAX_README_LINES} (move detail to docs/)"
