"""An isolated-environment adapter using the standard library only (the tests' throwaway venv has
nothing else): DP marginal histograms on the public domain, Laplace mechanism, sampled independently.

`overspend` runs noise for 2ε while the ledger claims ε (the host must refuse it); `crash` fails fit.
"""

import csv
import math
import pickle
import random


def _cell(column, value, bins):
    if "categories" in column:
        return column["categories"].index(value)
    width = (column["max"] - column["min"]) / bins
    return min(int((float(value) - column["min"]) / width), bins - 1)


def fit(train_csv, schema, epsilon, delta, seed, params):
    if params["crash"]:
        raise RuntimeError("model diverged inside the environment")
    columns, bins = schema["columns"], params["bins"]
    counts = [[0.0] * (len(c["categories"]) if "categories" in c else bins) for c in columns]
    with open(train_csv, newline="") as rows:
        for row in csv.DictReader(rows):
            for j, column in enumerate(columns):
                counts[j][_cell(column, row[column["name"]], bins)] += 1
    if math.isinf(epsilon):
        entries = [{"mechanism": "non_private", "epsilon": "inf", "delta": 0.0, "params": {}, "accountant": "none",
                    "description": "exact histograms"}]
    else:
        rng = random.Random(seed)
        scale = len(columns) / (2 * epsilon if params["overspend"] else epsilon)
        counts = [[c + scale * (rng.expovariate(1) - rng.expovariate(1)) for c in cs] for cs in counts]
        entries = [{"mechanism": "laplace", "epsilon": epsilon, "delta": 0.0, "accountant": "pure",
                    "params": {"l1_sensitivity": float(len(columns)), "scale": scale},
                    "description": "histograms of all columns, one release"}]
    ledger = {"format": "dpgym-ledger/1", "guarantee": "pure", "composition": "basic", "entries": entries}
    weights = [[max(c, 0.0) for c in cs] for cs in counts]
    weights = [w if sum(w) > 0 else [1.0] * len(w) for w in weights]
    return pickle.dumps({"columns": columns, "bins": bins, "weights": weights}), ledger


def sample(model, n, seed):
    model, rng = pickle.loads(model), random.Random(seed)
    draws = {}
    for column, weights in zip(model["columns"], model["weights"]):
        cells = rng.choices(range(len(weights)), weights, k=n)
        if "categories" in column:
            draws[column["name"]] = [column["categories"][c] for c in cells]
            continue
        width = (column["max"] - column["min"]) / model["bins"]
        values = [column["min"] + (c + rng.random()) * width for c in cells]
        if column["kind"] == "integer":
            low, high = math.ceil(column["min"]), math.floor(column["max"])
            values = [min(max(round(v), low), high) for v in values]
        draws[column["name"]] = values
    return [dict(zip(draws, row)) for row in zip(*draws.values())]
