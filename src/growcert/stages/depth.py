"""`growcert estimate-depth`: the first-order value of an inserted block per insertion point (P3; docs/science.md,
"estimate-depth (P3)").

For every insertion point of a gradient store, the family's zero-output block (`models/blocks.py`,
W_in seeded by (seed, point)) is applied to the stored activations z with its own forward code
(`ZeroOutputBlock.hidden`), and the per-example weight gradient G_i = Σ_t q_it h_itᵀ is formed from the
stored q. From the G_i, h and z of each pool (held-out `test` rows, and the `train` rows the model was
fit on), `stats.depth` gives

    value               unbiased ‖E[q hᵀ]‖_F² (positions summed) with SE and interval; value_plugin
    scaled_value        value × mean‖z_t‖² / mean‖h_t‖²: per unit step of the block's output relative
                        to the stream (the form saturation is judged on, P3 pilot), with SE and interval
    explained_fraction  held-out R² of q on the block's features: fitted on the other split
    grad_norm_sq        unbiased ‖E[Σ_t q_t]‖² (the raw activation-gradient signal), grad_sq_mean E‖q‖²

Definitions and justifications are in `stats/depth.py`. `growcert.report.depth.recommend_depth` turns a table of such
rows into the saturation decision, across the depth grid and within each model over its points.

Memory: the G_i of one point are held in float32, n × D × H × 4 bytes (1,024 examples of a width-64
stream with a 128-wide block: 34 MB; a width-4 ResNet's last stage, 256 channels and a 512-wide block:
512 MB); `max_feature_mb` refuses larger ones with a message. Cost is dominated by the n×n Gram of the G_i,
O(n² D H): 0.5 s for n = 512 and D H = 131,072 on one core.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from growcert.block_features import PointArrays
from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.models import family_of
from growcert.models.blocks import make_block, point_index
from growcert.runtime import torch_runtime
from growcert.stats import depth as stats
from growcert.store import (
    iter_sample_chunks,
    open_group,
    reading,
    require_variable,
    split_of,
    store_attrs,
    store_identity,
)
from growcert.training import to_device

COLUMNS = [
    "family",
    "dataset",
    "width",
    "depth",
    "seed",
    "step",
    "point",
    "point_index",
    "pool",
    "n",
    "features",
    "hidden",
    "positions",
    "value",
    "value_se",
    "value_lo",
    "value_hi",
    "value_plugin",
    "value_detectability",
    "scaled_value",
    "scaled_value_se",
    "scaled_value_lo",
    "scaled_value_hi",
    "explained_fraction",
    "grad_norm_sq",
    "grad_norm_sq_se",
    "grad_sq_mean",
    "mean_z_sq",
    "mean_h_sq",
    "level",
    "status",
]


def point_arrays(
    store: str | Path, point: str, family: str, settings: dict[str, Any], device: torch.device
) -> tuple[PointArrays, Any]:
    """Read one point chunk by chunk and build its PointArrays with the family's block (float64), whose
    features are computed on `device` (the block is drawn on the CPU, then moved: the same W_in anywhere)."""
    group = open_group(store, point)
    split = split_of(group)
    features = group["z"].shape[family_of(family).channel_dim]
    block = make_block(
        family, features, point, hidden=settings["block_hidden"], seed=settings["seed"], dtype=torch.float64
    ).to(device)
    hidden = block.w_in.shape[0]
    megabytes = len(split) * features * hidden * 4 / 2**20
    if megabytes > settings["max_feature_mb"]:
        raise ConfigError(
            f"depth: {point} of {store} needs {megabytes:.0f} MB of per-example block gradients "
            f"(n={len(split)}, features={features}, hidden={hidden}), above depth.max_feature_mb="
            f"{settings['max_feature_mb']}; lower depth.block_hidden or the dumped examples"
        )
    arrays = PointArrays(len(split), features, hidden)
    for (start, z), (_, q) in zip(iter_sample_chunks(store, point, "z"), iter_sample_chunks(store, point, "q")):
        arrays.add(
            start,
            block,
            to_device(torch.from_numpy(z), device).double(),
            to_device(torch.from_numpy(q), device).double(),
            split[start : start + len(z)],
        )
    return arrays, block


def estimate_depth(
    store_path: str | Path,
    settings: dict[str, Any] | None = None,
    log: Callable[[str], None] = print,
    threads: int = 1,
    *,
    device: str,
) -> pd.DataFrame:
    """One row per insertion point × pool: first-order value, scaled value, explained fraction, norms. The
    block's features are computed on `device` (a `device` setting); the estimators run on the CPU."""
    settings = stage_settings("depth", settings)
    with torch_runtime(threads, device=device) as runtime, reading(store_path):
        return _estimate_depth(store_path, settings, log, runtime.device)


def _estimate_depth(
    store_path: str | Path, settings: dict[str, Any], log: Callable[[str], None], device: torch.device
) -> pd.DataFrame:
    identity = store_identity(store_path)
    log(f"depth of {store_path}: block features on {device}")
    require_variable(store_path, "z", "estimate-depth (the inserted block reads the activations)")
    family = identity["family"]
    rows = []
    for point in settings["points"] or list(store_attrs(store_path)["groups"]):
        arrays, block = point_arrays(store_path, point, family, settings, device)
        split = split_of(open_group(store_path, point))
        features, hidden = block.weight.shape
        for pool in settings["pools"]:
            members = split == pool
            other = "train" if pool == "test" else "test"
            if members.sum() < 4:
                log(f"{point} {pool}: {members.sum()} examples, fewer than the 4 the estimators need; skipped")
                continue
            value = stats.first_order_value(arrays.g[members], settings["level"], settings["detect_threshold"])
            scaled = stats.scaled_value(
                value["value"], value["value_se"], arrays.z_sq[members], arrays.h_sq[members], settings["level"]
            )
            explained = np.nan
            if (split == other).sum() > 0:
                explained = stats.held_out_explained(
                    arrays.cross(split == other, features),
                    arrays.hidden_gram[other],
                    arrays.cross(members, features),
                    arrays.hidden_gram[pool],
                    arrays.q_sq[members].sum(),
                    settings["ridge"],
                )
            rows.append(
                {
                    **identity,
                    "point": point,
                    "point_index": point_index(point),
                    "pool": pool,
                    "features": features,
                    "hidden": hidden,
                    "positions": arrays.positions,
                    **value,
                    **scaled,
                    "explained_fraction": explained,
                    **stats.gradient_norm(arrays.position_sum[members]),
                    "grad_sq_mean": float(arrays.q_sq[members].mean()),
                    "level": settings["level"],
                }
            )
            row = rows[-1]
            log(
                f"{point} {pool}: n={row['n']} value={row['value']:.4g}±{row['value_se']:.2g} "
                f"(plug-in {row['value_plugin']:.4g}) scaled={row['scaled_value']:.4g} "
                f"explained={explained:.3f} ({row['status']})"
            )
    return pd.DataFrame(rows, columns=COLUMNS)
