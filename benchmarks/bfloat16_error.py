"""What `dump.dtype: bfloat16` does to the estimates: relative error of d_align and of the depth value against a
float32 store of the same checkpoint and examples, both measured in one run.

Uses the pieces of configs/ci.yaml's pipeline through the `growcert` CLI: prepare the dataset, train the ci
grid's smallest model of each family (resnet w1 d8 on digits, llama w16 d1 on Shakespeare), dump it twice
(float32; bfloat16 with shards), then estimate-alignment and estimate-depth on both stores. Prints, per family,
point and pool, the float32 and bfloat16 d_align (sum_positions) and depth value, their relative errors, and
the largest of each. Takes about a minute on 2 cores.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/bfloat16_error.py [--examples 128]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from growcert.plan import validate_config
from growcert.plan.grids import Run, train_settings

ROOT = Path(__file__).resolve().parents[1]
CASES = [("resnet", "digits", 1, 8), ("llama", "shakespeare", 16, 1)]


def growcert(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "growcert.cli", *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"growcert {args[0]} failed: {done.stderr.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=128, help="dumped examples per split")
    args = parser.parse_args()
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config.update(yaml.safe_load((ROOT / "configs" / "ci.yaml").read_text()))
    config = validate_config(config)
    work = Path(tempfile.mkdtemp(prefix="growcert-bf16-"))
    dump = {**config["dump"], "train_examples": args.examples, "test_examples": args.examples}
    rows = []
    for family, dataset, width, depth in CASES:
        data, run = work / dataset, work / family
        growcert(
            "prepare", "--dataset", dataset, "--settings", json.dumps(config["datasets"][dataset]), "--out", str(data)
        )
        growcert(
            "train",
            "--data",
            str(data),
            "--out",
            str(run),
            "--settings",
            json.dumps(train_settings(config, Run(family, dataset, width, depth, 0))),
        )
        checkpoint = sorted(run.glob("step*.pt"), key=lambda p: int(p.stem[4:]))[-1]
        tables = {}
        for dtype, extra in (("float32", {}), ("bfloat16", {"dtype": "bfloat16", "shards": 4})):
            store = work / f"{family}-{dtype}.zarr"
            growcert(
                "dump",
                "--checkpoint",
                str(checkpoint),
                "--data",
                str(data),
                "--out",
                str(store),
                "--settings",
                json.dumps({**dump, **extra}),
            )
            growcert(
                "estimate-alignment",
                "--store",
                str(store),
                "--out",
                str(work / f"{family}-{dtype}-a.csv"),
                "--settings",
                json.dumps(config["alignment"]),
            )
            growcert(
                "estimate-depth",
                "--store",
                str(store),
                "--out",
                str(work / f"{family}-{dtype}-d.csv"),
                "--settings",
                json.dumps(config["depth"]),
            )
            alignment = pd.read_csv(work / f"{family}-{dtype}-a.csv")
            alignment = alignment[alignment.reduction == "sum_positions"].set_index(["point", "pool"])
            tables[dtype] = (
                alignment["d_align_raw"],
                pd.read_csv(work / f"{family}-{dtype}-d.csv").set_index(["point", "pool"])["value"],
            )
        for (point, pool), exact in tables["float32"][0].items():
            value, rounded_value = tables["float32"][1][(point, pool)], tables["bfloat16"][1][(point, pool)]
            rows.append(
                {
                    "model": f"{family} w{width} d{depth}",
                    "point": point,
                    "pool": pool,
                    "d_align_f32": exact,
                    "d_align_bf16": tables["bfloat16"][0][(point, pool)],
                    "d_align_rel_err": abs(tables["bfloat16"][0][(point, pool)] / exact - 1),
                    "value_f32": value,
                    "value_bf16": rounded_value,
                    "value_rel_err": abs(rounded_value / value - 1),
                }
            )
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
    for model, group in table.groupby("model"):
        print(
            f"{model}: max relative error d_align {group.d_align_rel_err.max():.2e}, "
            f"depth value {group.value_rel_err.max():.2e} (median {np.median(group.value_rel_err):.2e})"
        )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
