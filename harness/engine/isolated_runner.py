"""One step of an isolated generator, run inside the generator's own Python environment.

Standard library only, and no dpgym import: the environment may pin an old numpy or pandas, or
not have dpgym at all. `dpgym.engine.isolation` starts it as ``<python> -I isolated_runner.py
request.json`` in a fresh work folder holding the request and its files, and reads back what it
writes there. Errors propagate: the traceback on stderr and the non-zero exit code are the host's
report. Keep it Python 3.8-compatible: environments pinned for old stacks run old interpreters.

The adapter named in the request ("module", or "module:object" for an object in it) provides two
functions:

    fit(train_csv, schema, epsilon, delta, seed, params) -> (model, ledger)
        train_csv: path of the training rows (header = column names); schema: the public schema as
        a dict (name, target, columns with kind, categories, min, max); epsilon may be inf;
        model: bytes, handed back to `sample` (the host keeps them, so the fitted generator
        pickles); ledger: a ``dpgym-ledger/1`` dict, re-accounted by the host like any other.
    sample(model, n, seed) -> rows
        n rows, each a dict from column name to value.
"""

import csv
import importlib
import json
import sys
from pathlib import Path

MODEL = "model.bin"
TRAIN = "train.csv"
SYNTHETIC = "synthetic.csv"
RESPONSE = "response.json"


def main(request_path):
    work = Path(request_path).resolve().parent
    request = json.loads(Path(request_path).read_text())
    sys.path[:0] = request["paths"]
    module, _, attribute = request["adapter"].partition(":")
    adapter = importlib.import_module(module)
    if attribute:
        adapter = getattr(adapter, attribute)
    if request["action"] == "fit":
        model, ledger = adapter.fit(str(work / TRAIN), request["schema"], request["epsilon"], request["delta"],
                                    request["seed"], request["params"])
        if not isinstance(model, bytes):
            raise TypeError("{}.fit must return the model as bytes, got {}".format(
                request["adapter"], type(model).__name__))
        (work / MODEL).write_bytes(model)
        (work / RESPONSE).write_text(json.dumps({"ledger": ledger}))
    elif request["action"] == "sample":
        rows = adapter.sample((work / MODEL).read_bytes(), request["n"], request["seed"])
        names = [column["name"] for column in request["schema"]["columns"]]
        with open(work / SYNTHETIC, "w", newline="") as out:
            writer = csv.DictWriter(out, names)
            writer.writeheader()
            writer.writerows(rows)
    else:
        raise ValueError("unknown action {!r}".format(request["action"]))


if __name__ == "__main__":
    main(sys.argv[1])
