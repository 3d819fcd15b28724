"""kNN regression, train on synthetic, test on real: DP-NF's downstream task (paper Fig. 2,
docs/methods/dp-nf.md#metrics).

A k-nearest-neighbours regressor (scikit-learn defaults: k = 5, uniform weights, Euclidean) learns
the target column from the other numeric columns of the synthetic rows and is scored by mean
squared error on the real test rows, in the dataset's own scale (for Life Science, DP-EM's
max-norm space, where the paper regresses pc10 on pc1..pc9).

Values (lower is better; omitted, not NaN, on a dataset with fewer than two numeric columns, where
the task does not exist; the detail says why):
- ``knn_mse``: the MSE of the synthetic-trained regressor.

Detail: the same regressor trained on the real training rows (the paper's "Baseline", a floor that
does not depend on the generator), the target and feature columns, and synthetic rows dropped for
missing values.

Options: ``target`` (default: the schema's last numeric column, pc10 on Life Science) and
``neighbours`` (default 5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpgym import Deferred, Direction, MetricSpec, hookimpl

OPTIONS: dict[str, Any] = {"target": None, "neighbours": 5}


def check_options(options: Mapping[str, Any]) -> None:
    k = options["neighbours"]
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"'neighbours' must be a positive integer, got {k!r}")
    if options["target"] is not None and not isinstance(options["target"], str):
        raise ValueError(f"'target' must be a column name, got {options['target']!r}")


SPEC = MetricSpec(
    name="knn_regression",
    version="1",
    evaluate=Deferred("dpgym.plugins.metrics.knn.compute:evaluate"),
    directions={"knn_mse": Direction.LOWER},
    description="kNN regression (k = 5) of the last numeric column on the others, trained on synthetic, "
                "MSE on real test rows (DP-NF Fig. 2)",
    options=OPTIONS,
    validate_options=check_options,
)


@hookimpl
def dpgym_metrics() -> list[MetricSpec]:
    return [SPEC]
