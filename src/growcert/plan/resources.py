"""The resource models of the rules: memory and runtime from a job's size, doubled on each retry, and each task's
threads and GPUs. A job's size comes from its settings, through `plan.settings.job_settings`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from growcert.experiments import has_units, task
from growcert.models import family_of
from growcert.plan.settings import job_settings


def per_attempt(amount: int) -> Callable[[Any, int], int]:
    """A resource of `amount` on the first attempt, doubled on the second, ... (mem_mb, runtime in minutes)."""
    return lambda wildcards, attempt: amount * attempt


class Resources:
    """The resources part of `growcert.plan.Plan`, from its config (and each job's settings)."""

    config: dict[str, Any]

    def task_threads(self, wildcards: Any) -> int:
        return self.config["threads"].get(wildcards.task, 1)

    def aggregate_gpus(self, gpus: int) -> Callable[[Any], int]:
        """A task rule's `gpu` resource: none where it gathers units (they train), `gpus` otherwise."""
        return lambda wildcards: 0 if has_units(task(wildcards.task)) else gpus

    def aggregate_threads(self, wildcards: Any) -> int:
        """A task rule's threads: 1 where it gathers units (the units train), config threads.<task> otherwise."""
        return 1 if has_units(task(wildcards.task)) else self.task_threads(wildcards)

    @staticmethod
    def _parameters(wildcards: Any) -> int:
        """~12·width²·depth: the parameters of a decoder of that width and depth (embeddings aside)."""
        return 12 * int(wildcards.width) ** 2 * int(wildcards.depth)

    def pretrained_mem_mb(self, bytes_per_parameter: int) -> Callable[[Any, int], int]:
        """mem_mb of a pretrained model's job: its parameters at `bytes_per_parameter`, as much again for
        activations, plus 4 GB; doubled on a retry."""
        return lambda wildcards, attempt: (
            attempt * (4000 + 2 * bytes_per_parameter * self._parameters(wildcards) // 2**20)
        )

    def pretrained_runtime(self, wildcards: Any, attempt: int) -> int:
        """An hour plus a forward-backward pass over every dumped token (6 flops per parameter and token) at a
        conservative 20 GFLOP/s per thread (docs/science.md, "Cost"). Doubled on a retry."""
        dump = job_settings(self.config, "dump", wildcards, pretrained=True)
        tokens = (dump["train_examples"] + dump["test_examples"]) * self.config["pretrained"]["context"]
        seconds = 6 * self._parameters(wildcards) * tokens / (2e10 * self.config["pretrained"]["threads"])
        return attempt * (60 + int(seconds) // 60)

    def store_runtime(self, wildcards: Any, attempt: int) -> int:
        """Minutes of a job that reads a whole gradient store: 20; a pretrained model's store (up to tens of GB)
        gets its dump's time. Doubled on a retry."""
        return self.pretrained_runtime(wildcards, attempt) if family_of(wildcards.family).pretrained else 20 * attempt

    def depth_mem_mb(self, wildcards: Any, attempt: int) -> int:
        """2 GB plus the largest per-point array of block gradients the stage may hold (depth.max_feature_mb,
        raised for large pretrained models); doubled on a retry."""
        return attempt * (2000 + job_settings(self.config, "depth", wildcards)["max_feature_mb"])

    def advise_mem_mb(self, wildcards: Any, attempt: int) -> int:
        """The dump's batch cap (advise.max_batch_mb) and the predictions' per-example gradients
        (advise.max_gradient_mb) on top of a model and its estimates' working memory."""
        section = self.config["advise"]
        return attempt * (4000 + 2 * int(section["max_batch_mb"]) + int(section["max_gradient_mb"]))
