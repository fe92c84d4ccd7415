"""How torch is set up for a stage: threads, deterministic algorithms, denormal flushing, seeding, device.

Every torch stage (train, dump, intervene, the depth stage's feature pass, grow, the P2 experiments) runs
inside `torch_runtime(...)`. The settings are process-wide, so the context manager puts back what it
found: tests run many stages in one process, and a stage must not change the next one's numbers.

- threads: one by default. Small models on a shared 2-core machine lose several times to thread
  contention, and Snakemake runs jobs side by side.
- deterministic algorithms: on, so the same seed gives the same checkpoint (CPU kernels here are
  deterministic anyway; on CUDA this is where cuBLAS would be told, see the accelerator issue).
- flush denormals: on for training loops. Small or zero weight decay drives gradients and Adam moments
  into denormal floats on CPU, which slows steps ~2x without changing results (PAPERS.md, P2
  calibration). Left off for stages that only measure (dump, interventions), whose float32/float64
  values must be exactly those of the forward and backward passes. torch has no getter for this flag:
  it is restored to torch's default (off) afterwards.
- seed: `torch.manual_seed(seed)` when given; the global generator's state is restored afterwards.
- device: only "cpu" so far (the accelerator issue fills this in); recorded in provenance by callers.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

from growcert.errors import ConfigError


@dataclass(frozen=True)
class Runtime:
    """What a stage runs on, as set by `torch_runtime`."""

    device: torch.device
    threads: int


def resolve_device(name: str = "cpu") -> torch.device:
    """The torch device for a device setting; one line naming the key when it cannot be had."""
    if name != "cpu":
        raise ConfigError(f"config key 'device': {name!r} is not available here (only 'cpu' so far)")
    return torch.device("cpu")


@contextmanager
def torch_runtime(threads: int | None = 1, *, seed: int | None = None, flush_denormal: bool = False,
                  deterministic: bool = True, device: str = "cpu") -> Iterator[Runtime]:
    """Set torch up for one stage, and put every process-wide setting back afterwards.

    `threads=None` keeps the current thread count (a caller inside another stage's runtime).
    """
    resolved = resolve_device(device)
    previous_threads = torch.get_num_threads()
    previous_deterministic = torch.are_deterministic_algorithms_enabled()
    previous_rng = torch.random.get_rng_state() if seed is not None else None
    if threads is not None:
        torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)
    if flush_denormal:
        torch.set_flush_denormal(True)
    if seed is not None:
        torch.manual_seed(seed)
    try:
        yield Runtime(device=resolved, threads=torch.get_num_threads())
    finally:
        torch.set_num_threads(previous_threads)
        torch.use_deterministic_algorithms(previous_deterministic)
        if flush_denormal:
            torch.set_flush_denormal(False)
        if previous_rng is not None:
            torch.random.set_rng_state(previous_rng)
