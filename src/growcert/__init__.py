"""growcert: does growing a trained residual network help on unseen data?

Trains residual networks over width x depth grids, stores per-example activation
gradients at insertion points, and estimates alignment certificates and
depth-sufficiency scores from them (docs/science.md says what each stage computes).
"""

__version__ = "0.1.0"
