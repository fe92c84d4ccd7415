"""`growcert estimate-depth`: the first-order value of an inserted block per insertion point (PAPERS.md P3).

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

Definitions and justifications are in `stats/depth.py`. `recommend_depth` turns a table of such rows into
the saturation decision, across the depth grid and within each model over its points.

Memory: the G_i of one point are held in float32, n × D × H × 4 bytes (1,024 examples of a width-64
stream with a 128-wide block: 34 MB; a width-4 ResNet's last stage, 256 channels and a 512-wide block:
512 MB); `max_feature_mb` refuses larger ones with a message. Cost is dominated by the n×n Gram of the G_i,
O(n² D H): 0.5 s for n = 512 and D H = 131,072 on one core.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from growcert.alignment import store_identity
from growcert.errors import ConfigError
from growcert.models.blocks import family_layout, make_block, point_index
from growcert.stats import depth as stats
from growcert.stats.intervals import normal_quantile
from growcert.store import iter_sample_chunks, open_group, open_store, split_of

DEFAULTS: dict[str, Any] = {
    "points": None,            # store groups to analyse; None = all
    "block_hidden": None,      # the block's hidden size; None = 2 × the stream's features
    "seed": 0,                 # W_in of the block at point p is seeded by block_seed(seed, p)
    "pools": ["test", "train"],
    "level": 0.95,             # coverage of the intervals and of the plateau test
    "detect_threshold": 2.0,   # value/SE below this: "within noise of zero"
    "ridge": 1e-3,             # explained fraction: ridge relative to the mean eigenvalue of S
    "max_feature_mb": 1024,    # largest per-point G array held in memory
    "saturation_draws": 2000,  # parametric resamples for the uncertainty of the decision
}
COLUMNS = ["family", "dataset", "width", "depth", "seed", "step", "point", "point_index", "pool", "n",
           "features", "hidden", "positions", "value", "value_se", "value_lo", "value_hi", "value_plugin",
           "value_detectability", "scaled_value", "scaled_value_se", "scaled_value_lo", "scaled_value_hi",
           "explained_fraction", "grad_norm_sq", "grad_norm_sq_se", "grad_sq_mean", "mean_z_sq", "mean_h_sq",
           "level", "status"]
SPLITS = ("train", "test")


def resolve_settings(settings: dict[str, Any] | None) -> dict[str, Any]:
    """DEFAULTS overlaid with `settings`; unknown keys and bad values fail in one line."""
    unknown = sorted(set(settings or {}) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"depth: unknown setting(s) {unknown}; known: {sorted(DEFAULTS)}")
    resolved = {**DEFAULTS, **(settings or {})}
    if not resolved["pools"] or any(pool not in SPLITS for pool in resolved["pools"]):
        raise ConfigError(f"depth.pools must be a non-empty subset of {list(SPLITS)}, got {resolved['pools']!r}")
    normal_quantile(resolved["level"])
    if resolved["block_hidden"] is not None and resolved["block_hidden"] < 1:
        raise ConfigError(f"depth.block_hidden must be null or >= 1, got {resolved['block_hidden']!r}")
    return resolved


def block_features(block, z: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(G, h, q) of a batch: G_i = Σ_t q_it h_itᵀ (n, D, H), h (n, P, H), q (n, P, D); batch first.

    h is the block's own `hidden` (the forward pass's code), so mean_i G_i is ∂(mean loss)/∂W_out of the
    inserted block (`ZeroOutputBlock.weight_gradient`, checked against autograd in tests/test_depth.py).
    """
    n = len(z)
    h = block.hidden(z)
    h = h.reshape(n, -1, h.shape[-1])
    q = q.movedim(block.channel_dim, -1).reshape(n, -1, block.weight.shape[0])
    return torch.einsum("npd,nph->ndh", q, h), h, q


class PointArrays:
    """Per-example arrays of one point (numpy; G in float32, the rest float64), per-split sums for the regression."""

    def __init__(self, n: int, features: int, hidden: int):
        # G_i flattened, kept in float32 like the stored z and q it comes from (half the memory); the
        # estimators cast every product to float64 (stats/accumulate.py)
        self.g = np.empty((n, features * hidden), dtype=np.float32)
        self.position_sum = np.empty((n, features))  # Σ_t q_it
        self.q_sq = np.empty(n)                      # Σ_t ‖q_it‖²
        self.z_sq = np.empty(n)                      # mean_t ‖z_it‖²
        self.h_sq = np.empty(n)                      # mean_t ‖h_it‖²
        self.hidden_gram = {split: np.zeros((hidden, hidden)) for split in SPLITS}  # S = Σ h hᵀ per split
        self.positions = 0

    def add(self, start: int, block, z: torch.Tensor, q: torch.Tensor, split: np.ndarray) -> None:
        g, h, q = block_features(block, z, q)
        stop = start + len(z)
        stream = z.movedim(block.channel_dim, -1).reshape(len(z), -1, q.shape[-1])
        self.g[start:stop] = g.reshape(len(z), -1).numpy()
        self.position_sum[start:stop] = q.sum(dim=1).numpy()
        self.q_sq[start:stop] = q.square().sum(dim=(1, 2)).numpy()
        self.z_sq[start:stop] = stream.square().sum(dim=-1).mean(dim=-1).numpy()
        self.h_sq[start:stop] = h.square().sum(dim=-1).mean(dim=-1).numpy()
        self.positions = h.shape[1]
        for name in SPLITS:
            rows = torch.from_numpy(split == name)
            if rows.any():
                self.hidden_gram[name] += torch.einsum("nph,npk->hk", h[rows], h[rows]).numpy()

    def cross(self, rows: np.ndarray, features: int) -> np.ndarray:
        """C = Σ_{i ∈ rows} G_i (D × H)."""
        return self.g[rows].sum(axis=0, dtype=np.float64).reshape(features, -1)


def point_arrays(store: str | Path, point: str, family: str, settings: dict[str, Any]) -> tuple[PointArrays, Any]:
    """Read one point chunk by chunk and build its PointArrays with the family's block (float64)."""
    group = open_group(store, point)
    split = split_of(group)
    features = group["z"].shape[family_layout(family)[0]]
    block = make_block(family, features, point, hidden=settings["block_hidden"], seed=settings["seed"],
                       dtype=torch.float64)
    hidden = block.w_in.shape[0]
    megabytes = len(split) * features * hidden * 4 / 2**20
    if megabytes > settings["max_feature_mb"]:
        raise ConfigError(f"depth: {point} of {store} needs {megabytes:.0f} MB of per-example block gradients "
                          f"(n={len(split)}, features={features}, hidden={hidden}), above depth.max_feature_mb="
                          f"{settings['max_feature_mb']}; lower depth.block_hidden or the dumped examples")
    arrays = PointArrays(len(split), features, hidden)
    for (start, z), (_, q) in zip(iter_sample_chunks(store, point, "z"), iter_sample_chunks(store, point, "q")):
        arrays.add(start, block, torch.from_numpy(z).double(), torch.from_numpy(q).double(),
                   split[start:start + len(z)])
    return arrays, block


def estimate_depth(store_path: str | Path, settings: dict[str, Any] | None = None,
                   log: Callable[[str], None] = print) -> pd.DataFrame:
    """One row per insertion point × pool: first-order value, scaled value, explained fraction, norms."""
    settings = resolve_settings(settings)
    identity = store_identity(store_path)
    family = identity["family"]
    rows = []
    for point in settings["points"] or list(open_store(store_path).attrs["groups"]):
        arrays, block = point_arrays(store_path, point, family, settings)
        split = split_of(open_group(store_path, point))
        features, hidden = block.weight.shape
        for pool in settings["pools"]:
            members = split == pool
            other = "train" if pool == "test" else "test"
            if members.sum() < 4:
                log(f"{point} {pool}: {members.sum()} examples, fewer than the 4 the estimators need; skipped")
                continue
            value = stats.first_order_value(arrays.g[members], settings["level"], settings["detect_threshold"])
            scaled = stats.scaled_value(value["value"], value["value_se"], arrays.z_sq[members],
                                        arrays.h_sq[members], settings["level"])
            explained = np.nan
            if (split == other).sum() > 0:
                explained = stats.held_out_explained(
                    arrays.cross(split == other, features), arrays.hidden_gram[other],
                    arrays.cross(members, features), arrays.hidden_gram[pool], arrays.q_sq[members].sum(),
                    settings["ridge"])
            rows.append({**identity, "point": point, "point_index": point_index(point), "pool": pool,
                         "features": features, "hidden": hidden, "positions": arrays.positions, **value, **scaled,
                         "explained_fraction": explained, **stats.gradient_norm(arrays.position_sum[members]),
                         "grad_sq_mean": float(arrays.q_sq[members].mean()), "level": settings["level"]})
            row = rows[-1]
            log(f"{point} {pool}: n={row['n']} value={row['value']:.4g}±{row['value_se']:.2g} "
                f"(plug-in {row['value_plugin']:.4g}) scaled={row['scaled_value']:.4g} "
                f"explained={explained:.3f} ({row['status']})")
    return pd.DataFrame(rows, columns=COLUMNS)


def _sequences(table: pd.DataFrame):
    """(view, keys, frame with columns rung/value/value_se/scaled_value/scaled_value_se) to decide on.

    across_depth: per (family, dataset, width, step, pool), each model depth's value at its last point,
    averaged over seeds (SE √Σse²/m); within_model: per model, its points in stream order.
    """
    base = ["family", "dataset", "width", "step", "pool"]
    model = base + ["depth", "seed"]
    last = table[table["point_index"] == table.groupby(model)["point_index"].transform("max")]
    for keys, frame in last.groupby(base, sort=True):
        per_depth = frame.groupby("depth").agg(
            value=("value", "mean"), scaled_value=("scaled_value", "mean"),
            value_se=("value_se", lambda s: np.sqrt((s ** 2).sum()) / len(s)),
            scaled_value_se=("scaled_value_se", lambda s: np.sqrt((s ** 2).sum()) / len(s)))
        if len(per_depth) >= 2:
            yield "across_depth", dict(zip(base, keys)), per_depth.reset_index().rename(columns={"depth": "rung"})
    for keys, frame in table.groupby(model, sort=True):
        if frame["point_index"].nunique() >= 2:
            yield "within_model", dict(zip(model, keys)), frame.sort_values("point_index").rename(
                columns={"point_index": "rung"})


def recommend_depth(table: pd.DataFrame, level: float = 0.95, draws: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The saturation decision (stats/depth.py's plateau test) for the raw and the scale-invariant value.

    One row per view × sequence × criterion. `recommended` is a model depth (across_depth) or a point
    index (within_model), with a percentile interval from parametric resampling; `falls` says whether the
    deepest value is significantly below the shallowest one, `fall_ratio` by how much.
    """
    z = normal_quantile(level)
    rows = []
    for view, keys, frame in _sequences(table):
        for criterion in ("value", "scaled_value"):
            values, ses = frame[criterion].to_numpy(float), frame[f"{criterion}_se"].to_numpy(float)
            decision = stats.saturation(frame["rung"].to_numpy(), values, ses, level, draws, seed)
            falls = values[0] - values[-1] > z * np.hypot(ses[0], ses[-1])
            rows.append({"family": keys["family"], "dataset": keys["dataset"], "width": keys["width"],
                         "step": keys["step"], "pool": keys["pool"], "view": view,
                         "depth": keys.get("depth", np.nan), "seed": keys.get("seed", np.nan),
                         "criterion": criterion, "levels": ",".join(str(int(x)) for x in frame["rung"]),
                         **decision, "first_value": values[0], "last_value": values[-1], "falls": bool(falls),
                         "fall_ratio": values[0] / values[-1] if values[-1] else np.nan, "level": level})
    return pd.DataFrame(rows)


def plot_depth(table: pd.DataFrame, out_png: str | Path) -> None:
    """Raw and scale-invariant value vs model depth (last point), and over the points of the deepest model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from growcert.plots import save_figure

    shown = table[(table["pool"] == "test") & (table["step"] == table.groupby(["family", "dataset"])["step"].transform("max"))]
    panels = list(shown.groupby(["family", "dataset"]))
    figure, axes = plt.subplots(max(1, len(panels)), 4, figsize=(17, 3.6 * max(1, len(panels))), squeeze=False)
    for row, ((family, dataset), frame) in enumerate(panels):
        last = frame[frame["point_index"] == frame.groupby(["depth", "seed", "width"])["point_index"].transform("max")]
        deepest = frame[frame["depth"] == frame["depth"].max()]
        specs = [(last, "depth", "value", "model depth (value at its last point)"),
                 (last, "depth", "scaled_value", "model depth (value at its last point)"),
                 (deepest, "point_index", "value", f"point index in the depth-{frame['depth'].max()} model"),
                 (deepest, "point_index", "scaled_value", f"point index in the depth-{frame['depth'].max()} model")]
        for column, (data, x, y, xlabel) in enumerate(specs):
            axis = axes[row, column]
            for width, part in data.groupby("width"):
                part = part.groupby(x).agg(v=(y, "mean"), se=(f"{y}_se", lambda s: np.sqrt((s ** 2).sum()) / len(s)))
                axis.errorbar(part.index, part["v"], yerr=normal_quantile(0.95) * part["se"], marker="o",
                              capsize=3, label=f"width {width}")
            positive = data[y][data[y] > 0]
            # symlog: unbiased estimates can be ≤ 0 (within noise of zero) and must stay visible
            axis.set_yscale("symlog", linthresh=float(positive.min()) if len(positive) else 1e-12)
            axis.axhline(0.0, color="black", lw=0.8)
            kind = "raw ‖E[q hᵀ]‖²" if y == "value" else "value × ‖z‖²/‖h‖² (scale-invariant)"
            axis.set(xlabel=xlabel, ylabel=kind, title=f"{family}/{dataset}: {kind}")
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
    figure.tight_layout()
    save_figure(figure, out_png)
