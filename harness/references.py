"""Reference files: the numbers a paper publishes, in dpgym's names (docs/references.md).

``leaderboard/references/NAME.toml`` holds one paper: ``paper`` (its short name), ``title``,
``[figures]`` (each figure or table the entries cite, with what it measures and how that differs from
dpgym's metric) and ``[[entries]]``, one published number each. Loading validates every entry and
names the file and the entry in its error, so a typo fails before any comparison. This module reads
no run and imports nothing heavy: `dpgym compare` (`dpgym.compare`) does the comparing.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

REFERENCES_DIR = Path(__file__).resolve().parent.parent / "leaderboard" / "references"
SOURCES = ("table", "text", "figure, read by eye")
SPREAD_KINDS = ("sd", "se", "unstated")
FILE_KEYS = {"paper", "title", "figures", "entries"}


class ReferenceError(ValueError):
    """A reference file is missing or malformed; the message names the file and the entry."""


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
    notes: str = ""

    @property
    def label(self) -> str:
        eps = "non-private" if self.epsilon is None else f"ε={format_epsilon(self.epsilon)}"
        return f"{self.figure}: {self.generator} × {self.dataset} × {eps} × {self.metric}"


ENTRY_KEYS = {f.name for f in fields(Entry)} - {"paper"}
REQUIRED_KEYS = {"figure", "dataset", "generator", "metric", "value", "source"}


@dataclass(frozen=True)
class Reference:
    name: str
    title: str
    path: Path
    figures: dict[str, str]  # figure → what it shows and how it differs from dpgym's measure
    entries: tuple[Entry, ...]


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
    entries = raw.get("entries")
    if not isinstance(entries, list) or not entries:
        raise ReferenceError(f"{path}: no [[entries]]")
    return Reference(path.stem, str(raw.get("title", paper)), path, dict(figures),
                     tuple(_entry(e, paper, figures, f"{path}: entries[{i}]") for i, e in enumerate(entries)))


def _number(raw: dict[str, Any], key: str, where: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if key == "epsilon" and value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReferenceError(f"{where}: '{key}' must be a number, got {value!r}")
    return float(value)


def _names(raw: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
        raise ReferenceError(f"{where}: '{key}' must be a list of dataset names, got {value!r}")
    return tuple(value)


def _entry(raw: Any, paper: str, figures: dict[str, str], where: str) -> Entry:
    if not isinstance(raw, dict):
        raise ReferenceError(f"{where}: not a table")
    where = f"{where} ({raw.get('figure', '?')}, {raw.get('generator', '?')}, {raw.get('dataset', '?')}, " \
            f"{raw.get('metric', '?')})"
    unknown, missing = sorted(set(raw) - ENTRY_KEYS), sorted(REQUIRED_KEYS - set(raw))
    if unknown:
        raise ReferenceError(f"{where}: unknown keys {unknown} (allowed: {', '.join(sorted(ENTRY_KEYS))})")
    if missing:
        raise ReferenceError(f"{where}: missing {missing}")
    texts = {k: raw[k] for k in ("figure", "dataset", "generator", "metric", "source")}
    if not all(isinstance(v, str) and v for v in texts.values()):
        raise ReferenceError(f"{where}: figure, dataset, generator, metric and source must be non-empty strings")
    if raw["figure"] not in figures:
        raise ReferenceError(f"{where}: figure {raw['figure']!r} is not described under [figures]")
    if raw["source"] not in SOURCES:
        raise ReferenceError(f"{where}: source must be one of {', '.join(map(repr, SOURCES))}, got {raw['source']!r}")
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
    if not isinstance(raw.get("notes", ""), str):
        raise ReferenceError(f"{where}: 'notes' must be a string")
    return Entry(paper=paper, **texts, value=_number(raw, "value", where), epsilon=_number(raw, "epsilon", where),
                 delta=_number(raw, "delta", where), spread=spread, spread_kind=kind, precision=precision, band=band,
                 replicates=replicates, variants=variants, notes=raw.get("notes", ""))
