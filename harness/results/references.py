"""Reference files: the numbers a paper publishes, in dpgym's names (docs/references.md).

``leaderboard/references/NAME.toml`` holds one paper: ``paper`` (its short name), ``title``,
``[figures]`` (each figure or table the entries cite, with what it measures and how that differs from
dpgym's metric), ``[[entries]]``, one published number each, and ``[[claims]]``, one ordering or
closeness each that the paper's text states without a number (a lost plot's "large gap between flat
clipping and the other three"). Loading validates every entry and claim and names the file and the
item in its error, so a typo fails before any comparison. This module reads no run and imports
nothing heavy: `dpgym compare` (`dpgym.results.compare`) does the comparing.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dpgym.data.datafiles import CHECKOUT

REFERENCES_DIR = CHECKOUT / "leaderboard" / "references"
SOURCES = ("table", "text", "figure, read by eye")
SPREAD_KINDS = ("sd", "se", "unstated")
FILE_KEYS = {"paper", "title", "figures", "entries", "claims"}
CLAIM_KINDS = ("below", "within")


class ReferenceError(ValueError):
    """A reference file is missing or malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class Baseline:
    """The row of the same suite that a relative entry divides by: a generator label and its metric
    value (the entry's own metric when not named)."""

    generator: str
    metric: str

    @property
    def text(self) -> str:
        return f"{self.generator} {self.metric}"


@dataclass(frozen=True)
class Entry:
    """One published number, in dpgym's names (see docs/references.md for each field)."""

    paper: str
    figure: str
    dataset: str
    generator: str
    metric: str
    value: float
    source: str
    epsilon: float | None = None  # None: a non-private result, whatever the run's ε
    delta: float | None = None
    spread: float | None = None
    spread_kind: str | None = None
    precision: float | None = None  # of a value read from a plot
    band: tuple[float, float] | None = None
    replicates: tuple[str, ...] = ()  # datasets pooled with `dataset` (the paper averages over folds)
    variants: tuple[str, ...] = ()  # other preparations of the data, each compared on its own
    # The value (and band) is a ratio to this row of the same run: "93 % of the non-private AUC".
    relative_to: Baseline | None = None
    notes: str = ""

    @property
    def label(self) -> str:
        eps = "non-private" if self.epsilon is None else f"ε={format_epsilon(self.epsilon)}"
        relative = "" if self.relative_to is None else f" / {self.relative_to.text}"
        return f"{self.figure}: {self.generator} × {self.dataset} × {eps} × {self.metric}{relative}"


@dataclass(frozen=True)
class Claim:
    """An ordering (``below``: each of `generators` has a lower mean than each of `others`) or a
    closeness (``within``: the means of `generators` lie within `tolerance` of each other) that the
    paper states in words, in dpgym's names (docs/references.md)."""

    paper: str
    figure: str
    dataset: str
    metric: str
    kind: str
    generators: tuple[str, ...]
    epsilon: float
    statement: str  # the paper's words
    source: str
    others: tuple[str, ...] = ()
    tolerance: float | None = None
    tolerance_source: str = ""  # where the tolerance comes from, the paper stating none
    delta: float | None = None
    notes: str = ""

    @property
    def text(self) -> str:
        if self.kind == "below":
            return f"{', '.join(self.generators)} below {', '.join(self.others)}"
        return f"{', '.join(self.generators)} within {self.tolerance:g} of each other"

    @property
    def label(self) -> str:
        return f"{self.figure}: {self.text} × {self.dataset} × ε={format_epsilon(self.epsilon)} × {self.metric}"


ENTRY_KEYS = {f.name for f in fields(Entry)} - {"paper"}
CLAIM_KEYS = {f.name for f in fields(Claim)} - {"paper"}
CLAIM_REQUIRED = {"figure", "dataset", "metric", "kind", "generators", "epsilon", "statement", "source"}
REQUIRED_KEYS = {"figure", "dataset", "generator", "metric", "value", "source"}


@dataclass(frozen=True)
class Reference:
    name: str
    title: str
    path: Path
    figures: dict[str, str]  # figure → what it shows and how it differs from dpgym's measure
    entries: tuple[Entry, ...]
    claims: tuple[Claim, ...] = ()


def format_epsilon(epsilon: float) -> str:
    return "∞" if math.isinf(epsilon) else f"{epsilon:g}"


def known_references() -> list[str]:
    return sorted(p.stem for p in REFERENCES_DIR.glob("*.toml"))


def load_reference(name_or_path: str) -> Reference:
    """A reference by name (``leaderboard/references/NAME.toml``) or by file path, validated."""
    path = Path(name_or_path)
    if not path.is_file():
        path = REFERENCES_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise ReferenceError(f"no reference file {name_or_path!r} (known references: {', '.join(known_references())})")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ReferenceError(f"{path}: {err}") from None
    unknown = sorted(set(raw) - FILE_KEYS)
    if unknown:
        raise ReferenceError(f"{path}: unknown keys {unknown} (allowed: {', '.join(sorted(FILE_KEYS))})")
    paper, figures = raw.get("paper"), raw.get("figures", {})
    if not isinstance(paper, str) or not paper:
        raise ReferenceError(f"{path}: 'paper' (the paper's short name) is missing")
    if not isinstance(figures, dict) or not all(isinstance(v, str) for v in figures.values()):
        raise ReferenceError(f'{path}: \'figures\' must be a table of "figure" = "what it shows"')
    entries, claims = raw.get("entries", []), raw.get("claims", [])
    if not isinstance(entries, list) or not isinstance(claims, list) or not (entries or claims):
        raise ReferenceError(f"{path}: no [[entries]] or [[claims]]")
    return Reference(path.stem, str(raw.get("title", paper)), path, dict(figures),
                     tuple(_entry(e, paper, figures, f"{path}: entries[{i}]") for i, e in enumerate(entries)),
                     tuple(_claim(c, paper, figures, f"{path}: claims[{i}]") for i, c in enumerate(claims)))


def _number(raw: dict[str, Any], key: str, where: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if key == "epsilon" and value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReferenceError(f"{where}: '{key}' must be a number, got {value!r}")
    return float(value)


def _names(raw: dict[str, Any], key: str, where: str, what: str = "dataset names") -> tuple[str, ...]:
    value = raw.get(key, [])
    if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
        raise ReferenceError(f"{where}: '{key}' must be a list of {what}, got {value!r}")
    return tuple(value)


def _common(raw: Any, figures: dict[str, str], where: str, allowed: set[str], required: set[str],
            texts: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """The checks an entry and a claim share: `where`, naming the item, and its `texts` fields."""
    if not isinstance(raw, dict):
        raise ReferenceError(f"{where}: not a table")
    named = raw.get("generators")
    who = raw.get("generator", ", ".join(map(str, named)) if isinstance(named, list) else "?")
    where = f"{where} ({raw.get('figure', '?')}, {who}, {raw.get('dataset', '?')}, {raw.get('metric', '?')})"
    unknown, missing = sorted(set(raw) - allowed), sorted(required - set(raw))
    if unknown:
        raise ReferenceError(f"{where}: unknown keys {unknown} (allowed: {', '.join(sorted(allowed))})")
    if missing:
        raise ReferenceError(f"{where}: missing {missing}")
    if not all(isinstance(raw[k], str) and raw[k] for k in texts):
        raise ReferenceError(f"{where}: {', '.join(texts)} must be non-empty strings")
    if raw["figure"] not in figures:
        raise ReferenceError(f"{where}: figure {raw['figure']!r} is not described under [figures]")
    if raw["source"] not in SOURCES:
        raise ReferenceError(f"{where}: source must be one of {', '.join(map(repr, SOURCES))}, got {raw['source']!r}")
    if not isinstance(raw.get("notes", ""), str):
        raise ReferenceError(f"{where}: 'notes' must be a string")
    return where, {k: raw[k] for k in texts}


def _entry(raw: Any, paper: str, figures: dict[str, str], where: str) -> Entry:
    where, texts = _common(raw, figures, where, ENTRY_KEYS, REQUIRED_KEYS,
                           ("figure", "dataset", "generator", "metric", "source"))
    precision = _number(raw, "precision", where)
    if (raw["source"] == "figure, read by eye") != (precision is not None):
        raise ReferenceError(f"{where}: a value read from a figure needs its reading's 'precision', and only it")
    spread, kind = _number(raw, "spread", where), raw.get("spread_kind")
    if (spread is None) != (kind is None) or (kind is not None and kind not in SPREAD_KINDS):
        raise ReferenceError(f"{where}: a 'spread' needs a 'spread_kind' ({', '.join(SPREAD_KINDS)}), and only it")
    band = raw.get("band")
    if band is not None:
        numbers = isinstance(band, list) and all(isinstance(b, int | float) and not isinstance(b, bool) for b in band)
        if not (numbers and len(band) == 2 and band[0] <= band[1]):
            raise ReferenceError(f"{where}: 'band' must be [low, high], got {band!r}")
        band = (float(band[0]), float(band[1]))
    replicates, variants = _names(raw, "replicates", where), _names(raw, "variants", where)
    if replicates and variants:
        raise ReferenceError(f"{where}: give 'replicates' or 'variants', not both")
    return Entry(paper=paper, **texts, value=_number(raw, "value", where), epsilon=_number(raw, "epsilon", where),
                 delta=_number(raw, "delta", where), spread=spread, spread_kind=kind, precision=precision, band=band,
                 replicates=replicates, variants=variants, relative_to=_baseline(raw, texts, where),
                 notes=raw.get("notes", ""))


def _baseline(raw: dict[str, Any], texts: dict[str, str], where: str) -> Baseline | None:
    """An entry's `relative_to = {generator = "...", metric = "..."}`, checked."""
    given = raw.get("relative_to")
    if given is None:
        return None
    if not (isinstance(given, dict) and set(given) <= {"generator", "metric"} and isinstance(given.get("generator"), str)
            and given["generator"] and isinstance(given.get("metric", texts["metric"]), str)):
        raise ReferenceError(f"{where}: 'relative_to' must be {{generator = \"LABEL\", metric = \"VALUE\"}} "
                             f"(metric optional), got {given!r}")
    if given["generator"] == texts["generator"]:
        raise ReferenceError(f"{where}: 'relative_to' names the entry's own generator")
    if raw.get("replicates"):
        raise ReferenceError(f"{where}: a relative entry compares one dataset at a time: no 'replicates'")
    return Baseline(given["generator"], given.get("metric", texts["metric"]))


def _claim(raw: Any, paper: str, figures: dict[str, str], where: str) -> Claim:
    where, texts = _common(raw, figures, where, CLAIM_KEYS, CLAIM_REQUIRED,
                           ("figure", "dataset", "metric", "kind", "statement", "source"))
    generators = _names(raw, "generators", where, "generator labels")
    others = _names(raw, "others", where, "generator labels")
    tolerance, source = _number(raw, "tolerance", where), raw.get("tolerance_source", "")
    if raw["kind"] == "below":
        if not generators or not others or set(generators) & set(others) or tolerance is not None:
            raise ReferenceError(f"{where}: a 'below' claim needs 'generators' and 'others', disjoint, and no "
                                 "'tolerance'")
    elif raw["kind"] == "within":
        if len(generators) < 2 or others or tolerance is None or tolerance <= 0 or not isinstance(source, str) \
                or not source:
            raise ReferenceError(f"{where}: a 'within' claim needs two or more 'generators', a positive "
                                 "'tolerance' and its 'tolerance_source', and no 'others'")
    else:
        raise ReferenceError(f"{where}: kind must be one of {', '.join(map(repr, CLAIM_KINDS))}, got {raw['kind']!r}")
    return Claim(paper=paper, **texts, generators=generators, epsilon=_number(raw, "epsilon", where),
                 others=others, tolerance=tolerance, tolerance_source=source, delta=_number(raw, "delta", where),
                 notes=raw.get("notes", ""))
