"""Work that does not depend on the generator is computed once per entry and read back unchanged."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgym import MetricContext, computed_once, digest
from dpgym.plugins.metrics.fidelity import compute as fidelity


def test_an_entry_is_computed_once_and_read_back_exactly(tmp_path, monkeypatch):
    monkeypatch.setenv("DPGYM_CACHE", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"values": np.random.default_rng(0).normal(size=5)}

    first = computed_once("probe", ["rows", 1], compute)
    again = computed_once("probe", ["rows", 1], compute)
    other = computed_once("probe", ["rows", 2], compute)
    assert len(calls) == 2  # once for each entry
    assert np.array_equal(first["values"], again["values"]) and np.array_equal(first["values"], other["values"])
    assert [p.suffix for p in tmp_path.iterdir()] == [".npz", ".npz"]  # no temporary file left


def test_the_digest_of_a_frame_follows_its_values_columns_and_types():
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    assert digest([frame]) == digest([frame.copy()])
    assert digest([frame]) != digest([frame.assign(a=[1, 3])])
    assert digest([frame]) != digest([frame.rename(columns={"a": "c"})])
    assert digest([frame]) != digest([frame.astype({"a": float})])


def test_fidelity_from_the_cache_equals_fidelity_computed_afresh(adult_split, adult_schema, tmp_path, monkeypatch):
    monkeypatch.setenv("DPGYM_CACHE", str(tmp_path))
    synthetic = adult_split.train.sample(frac=1.0, random_state=1).reset_index(drop=True)
    ctx = MetricContext(train=adult_split.train, test=adult_split.test, synthetic=synthetic, schema=adult_schema, seed=3)
    fresh = fidelity.evaluate(ctx)
    assert len(list(tmp_path.glob("fidelity-kendall-real-*.npz"))) == 1
    cached = fidelity.evaluate(ctx)
    direct, _ = fidelity.kendall_tau_pairs(adult_split.train, adult_schema)
    assert fresh.values == cached.values and fresh.detail == cached.detail
    assert np.array_equal(np.array(list(fresh.detail["kendall_real"].values())), direct)
