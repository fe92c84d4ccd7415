"""`growcert estimate-alignment`: d_align, certificates and empirical misalignment from one store (P1).

For each insertion point and each reduction of q to one vector per example (`sum_positions`:
what a growth step shared across positions sees; `flatten`: a per-position insertion), it
estimates on each pool (held-out `test` rows, and the `train` rows the model was fit on) the
unbiased moments, d_∥, d_2, d_align with intervals, the detectability of the mean and the
plug-in counterparts (`growcert.stats.alignment_row`), and the empirical misalignment
P(μ_M·g_K ≤ 0) over an (M, K) grid in two modes:

    iid         M and K both from the held-out pool: the theorem's setting, where
                p̂ ≤ B_exact ≤ B_align must hold (certificates from the held-out moments);
    train_test  M from the training rows, K held-out: the growth question, where the
                theorem's independence assumption can fail (the table says when it does).

Reduced pools are read lazily from the store (dask), so the store is never loaded whole.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from growcert.config import stage_settings
from growcert.stats import alignment_row, misalignment, reduce_examples
from growcert.stats.certificates import certificate_columns
from growcert.store import open_group, reading, split_of, store_attrs, store_identity


def reduced_pools(path: str | Path, point: str, reduction: str):
    """(train, test) reduced q of one point, lazily (dask-backed DataArrays)."""
    group = open_group(path, point)
    split = split_of(group)
    reduced = reduce_examples(group["q"], reduction)
    return (reduced.isel(sample=np.flatnonzero(split == "train")), reduced.isel(sample=np.flatnonzero(split == "test")))


def estimate_alignment(path: str | Path, settings: dict[str, Any], log: Callable[[str], None] = print) -> pd.DataFrame:
    """One row per point x reduction x pool: moments, ratios with intervals, detectability, plug-in."""
    settings = stage_settings("alignment", settings)
    with reading(path):
        return _estimate_alignment(path, settings, log)


def _estimate_alignment(path: str | Path, settings: dict[str, Any], log: Callable[[str], None]) -> pd.DataFrame:
    identity = store_identity(path)
    rows = []
    for point in list(store_attrs(path)["groups"]):
        for reduction in settings["reductions"]:
            train, test = reduced_pools(path, point, reduction)
            for pool, values in (("test", test), ("train", train)):
                row = alignment_row(values, detect_threshold=settings["detect_threshold"], level=settings["level"])
                rows.append({**identity, "point": point, "reduction": reduction, "pool": pool, **row})
                log(
                    f"{point} {reduction} {pool}: n={row['n']} N={row['dim']} ‖μ‖²/SE={row['detectability']:.2f} "
                    f"d_align={row['d_align_raw']:.4g} ({row['status']})"
                )
    return pd.DataFrame(rows)


def estimate_misalignment(
    path: str | Path, alignment: pd.DataFrame, settings: dict[str, Any], log: Callable[[str], None] = print
) -> pd.DataFrame:
    """One row per point x reduction x (M, K) x mode: p̂ with its Wilson interval, and the
    certificates B_exact, B_align from the held-out moments of `alignment` (no second moment pass)."""
    settings = stage_settings("alignment", settings)
    with reading(path):
        return _estimate_misalignment(path, alignment, settings, log)


def _estimate_misalignment(
    path: str | Path, alignment: pd.DataFrame, settings: dict[str, Any], log: Callable[[str], None]
) -> pd.DataFrame:
    identity = store_identity(path)
    held_out_rows = alignment[alignment["pool"] == "test"].set_index(["point", "reduction"])
    rows = []
    for (point, reduction), held_out in held_out_rows.iterrows():
        train, test = reduced_pools(path, point, reduction)
        for M, K in settings["MK"]:
            certificate = certificate_columns(held_out.to_dict(), M, K)
            for mode in settings["modes"]:
                available = len(test) >= M + K if mode == "iid" else (len(train) >= M and len(test) >= K)
                p_hat = low = high = np.nan
                if available:
                    first, second = (test, None) if mode == "iid" else (train, test)
                    p_hat, low, high = misalignment(
                        first, second, M, K, settings["replicates"], settings["seed"], level=settings["level"]
                    )
                rows.append(
                    {
                        **identity,
                        "point": point,
                        "reduction": reduction,
                        "mode": mode,
                        "M": M,
                        "K": K,
                        "replicates": settings["replicates"] if available else 0,
                        "p_hat": p_hat,
                        "p_lo": low,
                        "p_hi": high,
                        "status": held_out["status"],
                        **{
                            key: certificate[key]
                            for key in ("n_eff", "b_exact", "b_align", "b_exact_raw", "b_align_raw")
                        },
                        "detectability": held_out["detectability"],
                        "d_align_raw": held_out["d_align_raw"],
                    }
                )
        log(f"{point} {reduction}: misalignment over {len(settings['MK'])} (M, K) x {len(settings['modes'])} modes")
    return pd.DataFrame(rows)
