"""The public schema of a table: the only source from which generators may learn a domain.

A schema ships with each dataset (a TOML file). Column kinds, category lists and numeric bounds
in it are treated as public knowledge; anything learned from private rows must instead go
through a DP mechanism and a ledger entry.
"""

from __future__ import annotations

import difflib
import enum
import math
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import tomli_w


class ColumnKind(enum.StrEnum):
    CONTINUOUS = "continuous"
    INTEGER = "integer"
    CATEGORICAL = "categorical"
    ORDINAL = "ordinal"
    BINARY = "binary"

    @property
    def is_numeric(self) -> bool:
        return self in (ColumnKind.CONTINUOUS, ColumnKind.INTEGER)


# Integer columns pass through float64 (in generators, metrics and CSV parsing), which is exact up
# to here; beyond it values would round, and beyond 2^63 wrap in int64.
MAX_EXACT_INTEGER = 2**53
# The largest bound a numeric column may have: a square of a value or width (a variance, a squared
# distance) stays finite below ~1.3e154, and a sum of a million such squares below ~1e303.
MAX_BOUND = 1e150


class SchemaError(ValueError):
    """A schema file, or a frame checked against a schema, is invalid. The message names the fault."""


@dataclass(frozen=True)
class Column:
    name: str
    kind: ColumnKind
    categories: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None
    nullable: bool = False
    description: str = ""
    # Public knowledge that a numeric column is skewed with a long right tail (money amounts, byte
    # counts): generators may then model it on a log scale, a transform fixed before seeing rows.
    heavy_tailed: bool = False
    # Public resolution of a continuous column: its values are recorded as min + k·step (KDD's rates,
    # to two decimals). A modelling hint, as `heavy_tailed`: generators may treat the column as
    # discrete (DP-HFlow dequantizes it, as it does integers); rows and samples are not checked against it.
    step: float | None = None

    def __post_init__(self) -> None:
        where = f"column {self.name!r}"
        if self.kind.is_numeric:
            if self.min is None or self.max is None:
                raise SchemaError(f"{where}: {self.kind} columns need public bounds 'min' and 'max'; a column "
                                  "whose bounds no public source gives is listed under [[withheld]], never "
                                  "given bounds read off the rows")
            if not (math.isfinite(self.min) and math.isfinite(self.max)) or self.min >= self.max:
                raise SchemaError(f"{where}: bounds must be finite with min < max, got [{self.min}, {self.max}]")
            if max(-self.min, self.max) > MAX_BOUND:
                raise SchemaError(f"{where}: bounds [{self.min:g}, {self.max:g}] go beyond ±{MAX_BOUND:g}: generators "
                                  "and metrics square values and widths (variances, distances), which overflow a "
                                  "float there; declare the column in other units (e.g. thousands, or a log scale)")
            if self.kind is ColumnKind.INTEGER and max(-self.min, self.max) > MAX_EXACT_INTEGER:
                raise SchemaError(f"{where}: integer bounds [{self.min:g}, {self.max:g}] go beyond ±2^53, where "
                                  "integers are no longer exact as floats; declare the column continuous")
            if self.categories:
                raise SchemaError(f"{where}: a {self.kind} column takes no 'categories'")
            if self.step is not None:
                if self.kind is not ColumnKind.CONTINUOUS:
                    raise SchemaError(f"{where}: only continuous columns take a 'step' (integers have step 1)")
                if not (math.isfinite(self.step) and 0 < self.step <= self.max - self.min):
                    raise SchemaError(f"{where}: 'step' must be positive and at most max − min, got {self.step}")
        elif self.heavy_tailed or self.step is not None:
            raise SchemaError(f"{where}: only numeric columns can be 'heavy_tailed' or take a 'step'")
        else:
            if len(self.categories) < 1:
                raise SchemaError(f"{where}: a {self.kind} column needs a non-empty 'categories' list")
            if len(set(self.categories)) != len(self.categories):
                raise SchemaError(f"{where}: duplicate categories")
            if self.kind is ColumnKind.BINARY and len(self.categories) != 2:
                raise SchemaError(f"{where}: a binary column needs exactly 2 categories, got {len(self.categories)}")

    @property
    def is_numeric(self) -> bool:
        return self.kind.is_numeric

    @property
    def dtype(self) -> Any:
        if self.kind is ColumnKind.CONTINUOUS:
            return np.float64
        if self.kind is ColumnKind.INTEGER:
            return pd.Int64Dtype() if self.nullable else np.int64
        return pd.CategoricalDtype(list(self.categories), ordered=self.kind is ColumnKind.ORDINAL)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": str(self.kind)}
        if self.is_numeric:
            out["min"], out["max"] = self.min, self.max
        else:
            out["categories"] = list(self.categories)
        if self.nullable:
            out["nullable"] = True
        if self.heavy_tailed:
            out["heavy_tailed"] = True
        if self.step is not None:
            out["step"] = self.step
        if self.description:
            out["description"] = self.description
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Column:
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise SchemaError(f"a column entry has no 'name': {raw}")
        where = f"column {name!r}: "
        _refuse_unknown(raw, COLUMN_KEYS, where)
        try:
            kind = ColumnKind(raw.get("kind"))
        except ValueError:
            raise SchemaError(f"{where}unknown kind {raw.get('kind')!r} (one of {', '.join(ColumnKind)})") from None
        return cls(
            name=name,
            kind=kind,
            categories=_categories(raw, where),
            nullable=_typed(raw, "nullable", bool, where, False),
            heavy_tailed=_typed(raw, "heavy_tailed", bool, where, False),
            step=_number(raw, "step", where),
            description=_typed(raw, "description", str, where, ""),
            min=_number(raw, "min", where),
            max=_number(raw, "max", where),
        )


@dataclass(frozen=True)
class Withheld:
    """A column of the source table that the public table leaves out, and why: no documentation or
    public fact bounds it (a sampling weight, an unbounded amount), it identifies a record, or it is
    the raw form of a derived column. Declaring it keeps the schema an account of every source
    column: bounds are never read off the rows to keep it, and `Schema.conform` drops it by name."""

    name: str
    reason: str

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Withheld:
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise SchemaError(f"a [[withheld]] entry has no 'name': {raw}")
        where = f"withheld column {name!r}: "
        _refuse_unknown(raw, WITHHELD_KEYS, where)
        reason = _typed(raw, "reason", str, where, "")
        if not reason.strip():
            raise SchemaError(f"{where}needs a 'reason' (why no public bound or domain exists)")
        return cls(name=name, reason=reason)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "reason": self.reason}


WITHHELD_KEYS = ("name", "reason")
COLUMN_KEYS = ("name", "kind", "categories", "min", "max", "nullable", "description", "heavy_tailed", "step")
# `citation` and `license` are the csv plugin's provenance of a user dataset.
SCHEMA_KEYS = ("name", "target", "inferred_from_data", "reviewed", "columns", "withheld", "citation", "license")
_TYPE_NAMES = {bool: "true or false", str: "a string", list: "a list"}


def _refuse_unknown(raw: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """A misspelt key (``targte``) would silently leave its setting at the default."""
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        close = {k: difflib.get_close_matches(k, allowed, n=1) for k in unknown}
        hints = "".join(f"; did you mean {close[k][0]!r} for {k!r}?" for k in unknown if close[k])
        raise SchemaError(f"{where}unknown keys {unknown} (allowed: {', '.join(allowed)}){hints}")


def _typed(raw: dict[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
    """`raw[key]` if it is of `kind`: TOML's ``"false"`` is a string, and truthy."""
    value = raw.get(key, default)
    if not isinstance(value, kind):
        raise SchemaError(f"{where}'{key}' must be {_TYPE_NAMES[kind]}, got {value!r}")
    return value


def _number(raw: dict[str, Any], key: str, where: str) -> float | None:
    """A bound or step: a TOML number, not a boolean (``true`` would read as 1.0) or a string."""
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(f"{where}'{key}' must be a number, got {value!r}")
    return float(value)


def _categories(raw: dict[str, Any], where: str) -> tuple[str, ...]:
    """A list of strings or integers, compared with the data as text. A string is refused, not split
    into its letters; floats and booleans are refused because their text (``1.0``, ``True``) is
    rarely how a file writes them."""
    value = raw.get("categories", [])
    if not isinstance(value, list):
        raise SchemaError(f"{where}'categories' must be a list, got {value!r}")
    bad = [c for c in value if isinstance(c, bool) or not isinstance(c, (str, int))]
    if bad:
        raise SchemaError(f"{where}categories must be strings (or integers), got {bad}")
    return tuple(str(c) for c in value)


@dataclass(frozen=True)
class Schema:
    """Columns in table order, the prediction target, and where the schema came from."""

    name: str
    columns: tuple[Column, ...]
    target: str | None = None
    # Set by `dpgym schema infer`: bounds and categories were read off the rows, so they are not
    # public until a person has reviewed them (and set `reviewed = true`).
    inferred_from_data: bool = False
    reviewed: bool = True
    # Columns of the source left out of the public table, each with its reason (`Withheld`).
    withheld: tuple[Withheld, ...] = ()
    _by_name: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaError(f"schema {self.name!r}: duplicate column names {dupes}")
        if not self.columns:
            raise SchemaError(f"schema {self.name!r}: no columns")
        object.__setattr__(self, "_by_name", {c.name: c for c in self.columns})
        held = [w.name for w in self.withheld]
        both = sorted(set(held) & set(names))
        if both:
            raise SchemaError(f"schema {self.name!r}: columns {both} are both public columns and withheld")
        held_twice = sorted({n for n in held if held.count(n) > 1})
        if held_twice:
            raise SchemaError(f"schema {self.name!r}: columns {held_twice} are withheld twice")
        if self.target is not None:
            target = self._by_name.get(self.target)
            if target is None:
                raise SchemaError(f"schema {self.name!r}: target {self.target!r} is not a column")
            if target.is_numeric or len(target.categories) < 2:
                # classifiers are trained and scored on it: one class makes AUROC undefined and F1 trivial
                raise SchemaError(f"schema {self.name!r}: target {self.target!r} must be a discrete column with two "
                                  f"or more categories, got {target.kind} with "
                                  f"{len(target.categories) or 'no'} categories")

    # --- access -----------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def __getitem__(self, name: str) -> Column:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"schema {self.name!r} has no column {name!r}") from None

    @property
    def target_column(self) -> Column | None:
        return self[self.target] if self.target else None

    @property
    def features(self) -> list[Column]:
        return [c for c in self.columns if c.name != self.target]

    def project(self, names: Iterable[str]) -> Schema:
        """The schema of these columns alone (in table order), keeping the target only if it is one of them."""
        wanted = set(names)
        for name in wanted:
            self[name]  # a KeyError naming the schema and the column
        return replace(self, columns=tuple(c for c in self.columns if c.name in wanted),
                       target=self.target if self.target in wanted else None)

    def require_complete(self, model: str, columns: Iterable[Column] | None = None) -> None:
        """For a model with no representation of a missing value: refuse nullable columns (of those
        it models, all by default) by name, before a NaN reaches its arithmetic, where it fails far
        from the cause or drops rows."""
        nullable = [c.name for c in (self.columns if columns is None else columns) if c.nullable]
        if nullable:
            raise ValueError(f"{model} cannot model missing values, and schema {self.name!r} declares "
                             f"nullable columns {nullable}")

    def require_binary_target(self, who: str) -> Column:
        """The target of a two-class task (the private-learning track's), else a ValueError naming it."""
        target = self.target_column
        if target is None or len(target.categories) != 2:
            got = ("no target" if target is None else
                   f"target {target.name!r} ({target.kind}, {len(target.categories) or 'no'} categories)")
            raise ValueError(f"{who} needs a binary target, and schema {self.name!r} has {got}")
        return target

    # --- files ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "schema") -> Schema:
        try:
            _refuse_unknown(raw, SCHEMA_KEYS, "")
            entries = _typed(raw, "columns", list, "", [])
            if not all(isinstance(c, dict) for c in entries):
                raise SchemaError("'columns' must be tables [[columns]], each with a name and a kind")
            withheld = _typed(raw, "withheld", list, "", [])
            if not all(isinstance(w, dict) for w in withheld):
                raise SchemaError("'withheld' must be tables [[withheld]], each with a name and a reason")
            target = raw.get("target")
            if target is not None and not isinstance(target, str):
                raise SchemaError(f"'target' must be a column name (a string), got {target!r}")
            return cls(
                name=_typed(raw, "name", str, "", source),
                columns=tuple(Column.from_dict(c) for c in entries),
                target=target,
                inferred_from_data=_typed(raw, "inferred_from_data", bool, "", False),
                reviewed=_typed(raw, "reviewed", bool, "", True),
                withheld=tuple(Withheld.from_dict(w) for w in withheld),
            )
        except SchemaError as err:
            raise SchemaError(f"{source}: {err}") from None

    @classmethod
    def from_toml(cls, path: str | Path) -> Schema:
        path = Path(path)
        try:
            raw = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as err:
            raise SchemaError(f"cannot read schema file {path}: {err}") from None
        return cls.from_dict(raw, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.target:
            out["target"] = self.target
        if self.inferred_from_data:
            out["inferred_from_data"] = True
            out["reviewed"] = self.reviewed
        out["columns"] = [c.to_dict() for c in self.columns]
        if self.withheld:
            out["withheld"] = [w.to_dict() for w in self.withheld]
        return out

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())

    # --- frames -----------------------------------------------------------------------------
    def violations(self, frame: pd.DataFrame, max_rows: int = 5) -> list[str]:
        """Every way `frame` breaks the schema, one line per column and fault."""
        problems: list[str] = []
        missing = [n for n in self.names if n not in frame.columns]
        extra = [n for n in frame.columns if n not in self._by_name]
        if missing:
            problems.append(f"missing columns {missing}")
        if extra:
            problems.append(f"columns not in the schema {list(map(str, extra))}")
        for col in self.columns:
            if col.name in frame.columns:
                problems.extend(f"column {col.name!r}: {p}" for p in _column_violations(col, frame[col.name], max_rows))
        return problems

    def validate(self, frame: pd.DataFrame, what: str = "frame") -> None:
        problems = self.violations(frame)
        if problems:
            raise SchemaError(f"{what} does not match schema {self.name!r}: " + "; ".join(problems))

    def conform(self, frame: pd.DataFrame, what: str = "frame") -> pd.DataFrame:
        """Drop the withheld columns, validate, then return the frame in schema column order with
        canonical dtypes. Any other column not in the schema is an error, as in `validate`."""
        frame = frame.drop(columns=[w.name for w in self.withheld if w.name in frame.columns])
        self.validate(frame, what)
        return pd.DataFrame({col.name: _cast(col, frame[col.name].reset_index(drop=True)) for col in self.columns})


def _cast(col: Column, values: pd.Series) -> pd.Series:
    if col.is_numeric:
        numeric = pd.to_numeric(values)
        if col.kind is ColumnKind.INTEGER:
            numeric = numeric.round()
        return numeric.astype(col.dtype)
    return pd.Series(pd.Categorical.from_codes(_category_codes(values, col.categories), dtype=col.dtype))


def _category_codes(values: pd.Series, categories: tuple[str, ...]) -> np.ndarray:
    """Each value's code in `categories`, comparing values as text; -1 for missing or unknown.

    Works on the distinct values only, so a 500k-row column costs one factorisation.
    """
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    if len(uniques) == 0:
        return np.full(len(values), -1, dtype=np.int64)
    lookup = pd.Index(list(categories)).get_indexer(pd.Index(uniques).astype(str))
    return np.where(codes >= 0, lookup[codes], -1)


def _rows(mask: np.ndarray, values: pd.Series, max_rows: int) -> str:
    idx = np.flatnonzero(mask)[:max_rows]
    shown = ", ".join(f"{values.index[i]}={values.iloc[i]!r}" for i in idx)
    return f"{int(mask.sum())} rows (first: {shown})"


def _column_violations(col: Column, values: pd.Series, max_rows: int) -> list[str]:
    problems = []
    null = values.isna().to_numpy()
    if null.any() and not col.nullable:
        problems.append(f"missing values in a non-nullable column: {_rows(null, values, max_rows)}")
    present = ~null
    if col.is_numeric:
        numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad_type = present & np.isnan(numeric)
        if bad_type.any():
            problems.append(f"non-numeric values: {_rows(bad_type, values, max_rows)}")
        ok = present & ~bad_type
        infinite = ok & ~np.isfinite(numeric)
        if infinite.any():
            problems.append(f"infinite values: {_rows(infinite, values, max_rows)}")
        finite = ok & ~infinite
        outside = finite & ((numeric < col.min) | (numeric > col.max))
        if outside.any():
            problems.append(f"values outside the public bounds [{col.min:g}, {col.max:g}]: {_rows(outside, values, max_rows)}")
        if col.kind is ColumnKind.INTEGER:
            fractional = finite & (np.abs(numeric - np.round(numeric)) > 1e-9)
            if fractional.any():
                problems.append(f"non-integer values in an integer column: {_rows(fractional, values, max_rows)}")
    else:
        unknown = present & (_category_codes(values, col.categories) < 0)
        if unknown.any():
            problems.append(f"unknown categories: {_rows(unknown, values, max_rows)}")
    return problems
