"""The 2-D synthetic sets of DP-NF (half_moons, pinwheel, eight_gaussians) and the tuning set
checkerboard, 30,000 points each.

checkerboard is for tuning only: no benchmark suite scores it (tests/leaderboard/test_suites.py),
so a 2-D default chosen on it leaks nothing about the rows a leaderboard reports. It is the
checkerboard of FFJORD (Grathwohl et al. 2019), a standard 2-D benchmark of the flow literature
and none of DP-NF's: eight uniform squares, so multimodal with sharp edges like 8 Gaussians (what
made unbounded MAF scales diverge and DP-EM from a wide start stall there) but with non-Gaussian
modes, which favour neither the flow nor the Gaussian mixture; its density is known, −log 32 per
point.

Each set is generated from a fixed seed (0), so it is the same on every machine; its checksum is
the sha256 of the generated values, recorded in `CHECKSUMS` (so that listing the datasets generates
nothing) and checked whenever a set is generated: a library that changed what a seed draws makes the
dataset unavailable rather than silently another one. The split is DP-NF's: fold k of
``KFold(10, shuffle=True, random_state=0)`` is the test set (3,000 points), the rest trains; the
plain name is fold 1, ``NAME:fold=k`` picks another. Data are in their raw scale (bounds in
``datasets/toy2d/*.toml``); the DP-NF spec z-scores them inside the model with training-fold
statistics, which belongs to the generator, not the dataset.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from functools import cache, partial

import numpy as np
import pandas as pd

from dpgym import DatasetSpec, DatasetUnavailable, REPO_DATA, Schema, SpecLookup, Split, hookimpl
from dpgym.plugins.datasets.parametric import fold_number, parse_options

N_POINTS = 30_000
SEED = 0
FOLDS = 10


def half_moons(seed: int) -> np.ndarray:
    from sklearn.datasets import make_moons  # here, not at the top: `dpgym list` imports this module
    points, _ = make_moons(n_samples=N_POINTS, noise=0.05, random_state=seed)
    return points


def eight_gaussians(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # the centres of DP-NF's code: radius 2 around (3, 3), diagonals written as 1.414
    offsets = np.array([(0, -2), (-1.414, -1.414), (-2, 0), (-1.414, 1.414), (0, 2), (1.414, 1.414), (2, 0), (1.414, -1.414)])
    centres = np.repeat(3.0 + offsets, N_POINTS // len(offsets), axis=0)
    return rng.permutation(centres + 0.2 * rng.standard_normal(centres.shape))


def _libm(function: Callable[[float], float], values: np.ndarray) -> np.ndarray:
    return np.fromiter(map(function, values), dtype=np.float64, count=len(values))


def pinwheel(seed: int, arms: int = 5, radial_std: float = 0.3, tangential_std: float = 0.05, rate: float = 0.25) -> np.ndarray:
    """Johnson et al. (2016)'s pinwheel: each arm's points are rotated more the farther out they lie."""
    rng = np.random.default_rng(seed)
    arm = np.repeat(np.arange(arms), N_POINTS // arms)
    radial = 1.0 + radial_std * rng.standard_normal(len(arm))
    tangential = tangential_std * rng.standard_normal(len(arm))
    # exp, cos and sin from the C library, one value at a time: numpy's vectorised versions differ in
    # the last bit between instruction sets (AVX-512 or not), which would change the set's checksum
    angle = arm * 2 * np.pi / arms + rate * _libm(math.exp, radial)
    cos, sin = _libm(math.cos, angle), _libm(math.sin, angle)
    # the row vector (radial, tangential) times the rotation matrix [[cos, -sin], [sin, cos]]
    points = np.column_stack([radial * cos + tangential * sin, -radial * sin + tangential * cos])
    return rng.permutation(10.0 * points)


def checkerboard(seed: int) -> np.ndarray:
    """FFJORD's checkerboard: uniform on the 8 dark squares (side 2) of a 4 × 4 board on [-4, 4)².

    x is uniform on [-2, 2); y is uniform on one of the two unit cells of its column whose parity
    matches floor(x), the whole then scaled by 2 (FFJORD's `toy_data.py`). Only uniform draws and
    exact arithmetic, no exp or cos, whose SIMD versions differ in the last bit between CPUs: the
    checksum holds on any x86 CPU (checked with numpy's AVX-512 and AVX2 paths disabled).
    """
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, N_POINTS)
    y = rng.uniform(0.0, 1.0, N_POINTS) - 2.0 * rng.integers(0, 2, N_POINTS) + np.floor(x) % 2
    return 2.0 * np.column_stack([x, y])


GENERATORS: dict[str, Callable[[int], np.ndarray]] = {
    "half_moons": half_moons,
    "pinwheel": pinwheel,
    "eight_gaussians": eight_gaussians,
    "checkerboard": checkerboard,
}
CHECKSUMS = {
    "half_moons": "901a842077619b072763a1b1aefb44092ee87e3fd0048863fe7bee2264e9ccd2",
    "pinwheel": "f8e6c7b8116698727f94d086fe7ac5799704cb57af311081114b9986e4845bae",
    "eight_gaussians": "1d106029749b61da1e26956b72280714a8b8cf8234cff20d6e054dc07d5964cc",
    "checkerboard": "791752484e410ff5e2f495bf08268acde74977e0bd90a20ae4c1ca71c07854c9",
}
DESCRIPTIONS = {
    "half_moons": "DP-NF Half-Moons: make_moons(30000, noise=0.05)",
    "pinwheel": "DP-NF Pinwheel: 5 arms x 6,000 points (Johnson et al. 2016)",
    "eight_gaussians": "DP-NF 8 Gaussians: 8 x 3,750 points, std 0.2, radius 2 around (3, 3)",
    "checkerboard": "FFJORD checkerboard, tuning only (no benchmark suite scores it): uniform on 8 squares of side 2 in [-4, 4)^2",
}
DP_NF = ("Waites, C. & Cummings, R. (2021). Differentially Private Normalizing Flows for Privacy-Preserving "
         "Density Estimation. arXiv:2103.14068")
CITATIONS = {
    "half_moons": DP_NF,
    "pinwheel": DP_NF + "; Johnson, M. et al. (2016). Composing graphical models with neural networks. NeurIPS",
    "eight_gaussians": DP_NF,
    "checkerboard": "Grathwohl, W. et al. (2019). FFJORD: Free-form Continuous Dynamics for Scalable Reversible "
                    "Generative Models. ICLR",
}


@cache
def schema(name: str) -> Schema:
    return Schema.from_toml(REPO_DATA / "toy2d" / f"{name}.toml")


@cache
def points(name: str) -> pd.DataFrame:
    values = GENERATORS[name](SEED)
    rows = schema(name).conform(pd.DataFrame(values, columns=schema(name).names), name)
    found = hashlib.sha256(np.ascontiguousarray(rows.to_numpy()).tobytes()).hexdigest()
    if found != CHECKSUMS[name]:
        raise DatasetUnavailable(f"dataset {name!r}: the generated points have sha256 {found[:12]}…, not the recorded "
                                 f"{CHECKSUMS[name][:12]}…: numpy or scikit-learn now draw other points from seed {SEED}")
    return rows


def load(name: str, fold: int) -> Split:
    from sklearn.model_selection import KFold  # here, not at the top: `dpgym list` imports this module
    rows = points(name)
    train, test = list(KFold(FOLDS, shuffle=True, random_state=0).split(rows))[fold - 1]
    return Split(train=rows.iloc[train].reset_index(drop=True), test=rows.iloc[test].reset_index(drop=True))


@cache  # one spec object per variant, so the runner's per-process load cache is hit
def spec(name: str, fold: int = 1) -> DatasetSpec:
    fields = dict(
        version="1",
        load=partial(load, name, fold),
        schema=partial(schema, name),
        citation=CITATIONS[name],
        license="generated (no data licence)",
        checksum=CHECKSUMS[name],
        description=f"{DESCRIPTIONS[name]}; seed {SEED}; test fold {fold} of KFold(10, seed 0)",
    )
    if fold != 1:
        return DatasetSpec(name=f"{name}:fold={fold}", **fields)
    return DatasetSpec(name=name, resolve=partial(_resolve, name), **fields)


def _resolve(name: str, argument: str, plugins: SpecLookup) -> DatasetSpec:
    return spec(name, parse_options(argument, {"fold": fold_number(FOLDS)}, name).get("fold", 1))


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [spec(name) for name in GENERATORS]
