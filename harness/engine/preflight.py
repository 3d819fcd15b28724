"""What a run checks before any cell runs, so that a fault of the input stops it with one error
instead of failing every cell, and a dry run that passes means the run will start.

The grid itself (plugin names, hyper-parameters and their types, learners' targets) is checked by
`dpgym.engine.grid.expand`. Here: the run directory can be written, and every dataset of the suite loads
once, with its rows matching its schema and a prediction target that has two classes in each
split. A dataset whose files are not on this machine is left to its cells, which report it
unavailable with how to get it; a dataset plugin that crashes for another reason fails its cells
too, as any plugin's fault does.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pandas as pd

from dpgym.data.datafiles import DatasetUnavailable
from dpgym.data.inference import UnreadableTable
from dpgym.data.splits import SplitError, load_split
from dpgym.registry import Registry
from dpgym.results.store import RunStore
from dpgym.engine.suite import Suite
from dpgym.schema import Schema, SchemaError
from dpgym.specs import Split


class InputError(ValueError):
    """An input of the run (a dataset's file or rows, the run directory) is unusable; the message
    names the dataset or path and the fault."""


def check_out(out: Path) -> None:
    """The run directory is a directory this process can create or write, without creating it."""
    if out.exists():
        if not out.is_dir():
            raise InputError(f"--out {out}: is a file, not a directory; name a new or an earlier run directory")
        store = RunStore(out)
        cells, manifest = store.cells, store.manifest_path
        misplaced = cells if cells.exists() and not cells.is_dir() else manifest if manifest.is_dir() else None
        if misplaced is not None:
            raise InputError(f"--out {out}: {misplaced} is a {'directory' if misplaced.is_dir() else 'file'}, so this "
                             "is not a run directory; name a new directory")
        if not os.access(out, os.W_OK | os.X_OK):
            raise InputError(f"--out {out}: cannot write into it (permission denied)")
        return
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"--out {out}: {parent} is a file, so the run directory cannot be created under it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: cannot create it in {parent} (permission denied)")


def check_datasets(suite: Suite, registry: Registry) -> list[str]:
    """Load each dataset of the suite once and check it; returns its warnings (an unreviewed schema)
    as lines for the user, and raises `InputError` for the first unusable dataset."""
    notes: list[str] = []
    for name in suite.datasets:
        spec = registry.dataset(name)
        if spec.missing():
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                schema = spec.schema()
                split = load_split(spec.load)  # once: the cells a serial run runs here, and the report, reuse it
            except DatasetUnavailable:
                continue
            except (SchemaError, UnreadableTable, SplitError) as err:
                raise InputError(f"dataset {name!r}: {err}") from None
            except Exception:  # a dataset plugin's own fault fails its cells, like any plugin's
                continue
        notes.extend(dict.fromkeys(f"dataset {name!r}: {w.message}" for w in caught))
        _check_split(name, schema, split)
    return notes


def _check_split(name: str, schema: Schema, split: Split) -> None:
    if split.train.empty:
        raise InputError(f"dataset {name!r}: the training split has no rows")
    target = schema.target
    if target is None:
        return
    for which, rows in (("training", split.train), ("test", split.test)):
        classes = pd.Series(rows[target]).dropna().unique()
        if len(classes) < 2:
            held = f"only {str(classes[0])!r}" if len(classes) else "no values"
            raise InputError(
                f"dataset {name!r}: target column {target!r} holds {held} in the {which} rows; classifiers need two "
                "or more classes (AUROC is undefined with one): fix the file or the split, or drop 'target' from "
                "the schema")

