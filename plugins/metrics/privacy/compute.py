"""The code of `dpgym.plugins.metrics.privacy`, imported only when a cell uses it. What each value means,
the sample sizes and why: the docstring of `dpgym.plugins.metrics.privacy`, which holds the spec.

scikit-learn finds the nearest neighbours (brute force, which its trees do not beat in the one-hot
space: a ball tree took 30 times longer on Adult) and scores the attack; pandas matches rows exactly.
Written here, because no library offers them for a schema: the distance space (the shared
`dpgym.TableEncoder`, then the log1p of heavy-tailed columns and the one-hot scaling), and the k-NN
density ratio, which is two neighbour distances and a logarithm.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import NearestNeighbors

from dpgym import Column, MetricContext, MetricResult, Schema, TableEncoder, cell_threads

# The holdout, the training members and the attacker's reference are at most this many rows each.
MAX_REFERENCE_ROWS = 5_000
# Synthetic rows whose distance to the closest record is measured.
MAX_DCR_SYNTHETIC_ROWS = 5_000
# Synthetic rows the attacker's density is estimated from: all of them up to this many, since a
# subsample hides copies of members it happens to leave out (Adult's 32,561 rows fit).
MAX_ATTACK_SYNTHETIC_ROWS = 40_000
# k of the k-NN density estimates: overfitting shows at single records, and a larger k averages it
# away (`real` on Adult: attack AUC 0.81 with k = 1, 0.59 with k = 3, 0.53 with k = 10).
DENSITY_NEIGHBOURS = 1
# Distances are rounded to this many decimals: below, floating-point noise of the distance computation.
DISTANCE_DECIMALS = 6
DISTANCE_RESOLUTION = 10.0 ** -DISTANCE_DECIMALS


class DistanceSpace:
    """Rows as points whose coordinates follow from the schema alone: numeric columns scaled by their
    public bounds to [0, 1] (on a log1p scale when `heavy_tailed`), and discrete columns one-hot with
    each slot scaled by 1/√2, so that two different categories are as far apart (1) as the two ends
    of a numeric range. A nullable numeric column's [present, missing] flag is scaled the same way."""

    def __init__(self, schema: Schema):
        self.encoder = TableEncoder(schema, discrete="onehot", numeric_range=(0.0, 1.0))

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        points = self.encoder.encode(frame)
        for block in self.encoder.blocks:
            column = block.column
            if not block.is_numeric:
                points[:, block.start:block.stop] /= math.sqrt(2.0)
            elif column.heavy_tailed:
                # log1p(x − min) / log1p(max − min), the log scale dpgym's generators use for such columns
                width = column.max - column.min
                points[:, block.start] = np.log1p(points[:, block.start] * width) / math.log1p(width)
        return points


def nearest_distances(queries: np.ndarray, points: np.ndarray, neighbours: int = 1) -> np.ndarray:
    """Each query's distance to its `neighbours`-th nearest point, rounded to DISTANCE_DECIMALS so
    that floating-point noise neither breaks ties nor separates a row from its copy."""
    search = NearestNeighbors(n_neighbors=neighbours, algorithm="brute", n_jobs=cell_threads()).fit(points)
    return np.round(search.kneighbors(queries, return_distance=True)[0][:, -1], DISTANCE_DECIMALS)


def rows_of(frame: pd.DataFrame, size: int, rng: np.random.Generator) -> pd.DataFrame:
    """`size` rows drawn without replacement (all of them, in order, when there are no more)."""
    if size >= len(frame):
        return frame
    return frame.iloc[np.sort(rng.choice(len(frame), size=size, replace=False))]


def exact_keys(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """One comparable value per cell: category codes, integers as they are, and a continuous column
    with a public `step` as its index on the grid min + k·step; missing values stay missing."""
    keys = {}
    for column in schema.columns:
        keys[column.name] = (_numeric_key(frame[column.name], column) if column.is_numeric
                             else frame[column.name].astype(column.dtype).cat.codes.to_numpy())
    return pd.DataFrame(keys)


def _numeric_key(values: pd.Series, column: Column) -> np.ndarray:
    numbers = values.to_numpy(dtype=float, na_value=np.nan)
    if column.step is None:
        return numbers
    return np.round((numbers - column.min) / column.step)


def exact_match_share(synthetic_keys: pd.DataFrame, real_keys: pd.DataFrame) -> float:
    """Share of synthetic rows equal on every column to some real row (pandas matches missing with
    missing, and −0.0 with 0.0)."""
    matched = synthetic_keys.merge(real_keys.drop_duplicates(), how="left", indicator=True)["_merge"]
    return float((matched == "both").mean())


def dcr_values(synthetic: np.ndarray, members: np.ndarray, holdout: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
    """`dcr_share` and `dcr_ratio`, and the two median distances they come from."""
    to_train, to_holdout = nearest_distances(synthetic, members), nearest_distances(synthetic, holdout)
    share = float(np.mean(to_train < to_holdout) + 0.5 * np.mean(to_train == to_holdout))
    median_train, median_holdout = float(np.median(to_train)), float(np.median(to_holdout))
    ratio = median_train / median_holdout if median_holdout > 0 else float("nan")
    return {"dcr_share": share, "dcr_ratio": ratio}, {"median_dcr_train": median_train,
                                                      "median_dcr_holdout": median_holdout}


def density_ratio_scores(candidates: np.ndarray, synthetic: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """log p̂_synthetic(x) − log p̂_reference(x) up to a constant, with the k-NN density estimate
    p̂(x) = k / (n · V_d · r_k(x)^d): the log ratio is d · (log r_k,reference − log r_k,synthetic) plus
    a constant, and d > 0 does not change the ranking. A distance of zero (a copy) counts as
    DISTANCE_RESOLUTION, so a record copied into both tables is a tie, not 0/0."""
    radius_synthetic = np.maximum(nearest_distances(candidates, synthetic, DENSITY_NEIGHBOURS), DISTANCE_RESOLUTION)
    radius_reference = np.maximum(nearest_distances(candidates, reference, DENSITY_NEIGHBOURS), DISTANCE_RESOLUTION)
    return np.log(radius_reference) - np.log(radius_synthetic)


def evaluate(ctx: MetricContext) -> MetricResult:
    schema, train, test, synthetic = ctx.schema, ctx.train, ctx.test, ctx.synthetic
    if len(test) < 2:
        return MetricResult({}, {"skipped": f"the test split has {len(test)} rows; the holdout and the "
                                            "attacker's reference need one each"})
    rng = np.random.default_rng(ctx.seed)
    shuffled = test.iloc[rng.permutation(len(test))]
    holdout_size = min(len(test) // 2, MAX_REFERENCE_ROWS, len(train))
    holdout = shuffled.iloc[:holdout_size]
    reference = shuffled.iloc[holdout_size:holdout_size + MAX_REFERENCE_ROWS]
    members = rows_of(train, holdout_size, rng)

    space = DistanceSpace(schema)
    member_points, holdout_points = space.encode(members), space.encode(holdout)
    dcr, medians = dcr_values(space.encode(rows_of(synthetic, MAX_DCR_SYNTHETIC_ROWS, rng)), member_points, holdout_points)

    scores = density_ratio_scores(np.vstack([member_points, holdout_points]),
                                  space.encode(rows_of(synthetic, MAX_ATTACK_SYNTHETIC_ROWS, rng)),
                                  space.encode(reference))
    is_member = np.r_[np.ones(len(members)), np.zeros(len(holdout))]
    mia_auc = float(roc_auc_score(is_member, scores))

    synthetic_keys = exact_keys(synthetic, schema)
    values = {**dcr, "mia_auc": mia_auc,
              "exact_match_rate": exact_match_share(synthetic_keys, exact_keys(train, schema)),
              "exact_match_rate_holdout": exact_match_share(synthetic_keys, exact_keys(test, schema))}
    detail = {
        **medians,
        # The fair partner of exact_match_rate_holdout: the training rows cut to the test split's size.
        "exact_match_rate_train_sized_as_test": exact_match_share(
            synthetic_keys, exact_keys(rows_of(train, len(test), rng), schema)),
        "rows": {"train_members": len(members), "holdout": len(holdout), "attack_reference": len(reference),
                 "dcr_synthetic": min(len(synthetic), MAX_DCR_SYNTHETIC_ROWS),
                 "attack_synthetic": min(len(synthetic), MAX_ATTACK_SYNTHETIC_ROWS)},
        "density_neighbours": DENSITY_NEIGHBOURS,
    }
    return MetricResult(values, detail)
