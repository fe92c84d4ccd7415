"""growcert: does growing a trained residual network help on unseen data?

Trains residual networks over width x depth grids, stores per-example activation
gradients at insertion points, and estimates alignment certificates and
depth-sufficiency scores from them (docs/science.md says what each stage computes).
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """`growcert.open_store`: the gradient store's opener (`growcert.store.open_store`), imported when first asked
    for, so that `import growcert` (the command line's first step) stays free of zarr and xarray."""
    if name == "open_store":
        from growcert.store import open_store

        return open_store
    raise AttributeError(f"module 'growcert' has no attribute {name!r}")
