"""How torch is set up for a stage: threads, deterministic algorithms, denormal flushing, seeding, device.

Every torch stage (train, dump, intervene, the depth stage's feature pass, grow, the P2 experiments) runs
inside `torch_runtime(...)`. The settings are process-wide, so the context manager puts back what it
found: tests run many stages in one process, and a stage must not change the next one's numbers.

- threads: one by default. Snakemake runs jobs side by side, and small models lose more to thread contention
  than they gain from a second thread (docs/science.md, "Cost").
- deterministic algorithms: on, so the same seed gives the same checkpoint (CPU kernels here are
  deterministic anyway; on CUDA this is where cuBLAS would be told, see the accelerator issue).
- flush denormals: on for training loops. Small or zero weight decay drives gradients and Adam moments
  into denormal floats on CPU, which slows steps without changing results (docs/science.md, "Cost"). Left off
  for stages that only measure (dump, interventions), whose float32/float64
  values must be exactly those of the forward and backward passes. torch has no getter for this flag:
  it is restored to torch's default (off) afterwards.
- seed: `torch.manual_seed(seed)` when given; the global generator's state is restored afterwards.
- device: the top-level config key `device` (auto | cpu | cuda | cuda:N), resolved where the job runs
  (`resolve_device`): `auto` is cuda when torch sees one, else cpu. On CUDA, deterministic algorithms are
  asked for the documented way (CUBLAS_WORKSPACE_CONFIG set before cuBLAS starts) with `warn_only`, so an
  op without a deterministic kernel warns in the job's log instead of failing or passing silently.
  `allow_tf32` (bf16 training) lets matmuls and convolutions use TF32; it is put back afterwards.
  Callers record the device in provenance (`device_record`).
- numerics: the CPU kernels a stage runs with are chosen before it starts, by the job's environment
  (`growcert.numerics`: portable pins them, native lets each library choose by the CPU); `torch_runtime` checks
  that torch runs the kernels the mode says and hands the record on (`Runtime.numerics`) for provenance.
- batch size: `capped_batch_size` lowers a configured batch so that the per-example arrays one batch puts
  on the device stay under a memory cap (config dump.max_batch_mb, intervene.max_batch_mb).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from growcert import numerics
from growcert.errors import ConfigError

DEVICE_SETTING = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
# cuBLAS's documented setting for reproducible results (CUDA >= 10.2); it must be set before cuBLAS starts.
CUBLAS_DETERMINISTIC = ":4096:8"


@dataclass(frozen=True)
class Runtime:
    """What a stage runs on, as set by `torch_runtime`."""

    device: torch.device
    threads: int
    numerics: dict


def resolve_device(name: str = "auto") -> torch.device:
    """The torch device for a `device` setting, on this machine; one line naming the key when it cannot be had."""
    if not DEVICE_SETTING.match(str(name)):
        raise ConfigError(f"config key 'device': {name!r} is not one of auto, cpu, cuda, cuda:N")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(
            f"config key 'device': {name!r}, but torch sees no CUDA device on this machine "
            "(torch.cuda.is_available() is False); use device: auto or cpu"
        )
    index = int(name.split(":")[1]) if ":" in name else 0
    if index >= torch.cuda.device_count():
        raise ConfigError(
            f"config key 'device': {name!r}, but this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    return torch.device(name)


def wants_gpu(name: str) -> bool:
    """Whether a job with this `device` setting, planned on this machine, should be given a GPU."""
    return str(name).startswith("cuda") or (name == "auto" and torch.cuda.is_available())


def device_record(device: torch.device) -> dict[str, str]:
    """What provenance keeps of the device a stage ran on."""
    record = {"device": str(device)}
    if device.type == "cuda":
        record["device_name"] = torch.cuda.get_device_name(device)
    return record


def capped_batch_size(batch_size: int, bytes_per_example: int, max_batch_mb: float | None) -> int:
    """`batch_size`, lowered (to no less than 1) so that `bytes_per_example` × batch fits in `max_batch_mb`
    MiB; unchanged when the cap is None."""
    if max_batch_mb is None:
        return batch_size
    return max(1, min(batch_size, int(max_batch_mb * 2**20 // max(1, bytes_per_example))))


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    """torch.use_deterministic_algorithms without its import of torch._inductor.config (~2 s of every job's
    start, to set a flag of the compiler, which this package never uses); the public call where torch lacks
    the setter it wraps."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


@contextmanager
def torch_runtime(
    threads: int | None = 1,
    *,
    seed: int | None = None,
    flush_denormal: bool = False,
    deterministic: bool = True,
    device: str = "cpu",
    allow_tf32: bool = False,
) -> Iterator[Runtime]:
    """Set torch up for one stage, and put every process-wide setting back afterwards.

    `threads=None` keeps the current thread count (a caller inside another stage's runtime).
    """
    resolved = resolve_device(device)
    numbers = numerics.check()
    if resolved.type == "cuda" and deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)
    previous_threads = torch.get_num_threads()
    previous_deterministic = torch.are_deterministic_algorithms_enabled()
    previous_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    previous_tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    previous_rng = torch.random.get_rng_state() if seed is not None else None
    if threads is not None:
        torch.set_num_threads(threads)
    _set_deterministic(deterministic, warn_only=resolved.type == "cuda")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = allow_tf32
    if flush_denormal:
        torch.set_flush_denormal(True)
    if seed is not None:
        torch.manual_seed(seed)  # seeds every CUDA device's generator too
    try:
        yield Runtime(device=resolved, threads=torch.get_num_threads(), numerics=numbers)
    finally:
        torch.set_num_threads(previous_threads)
        _set_deterministic(previous_deterministic, warn_only=previous_warn_only)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous_tf32
        if flush_denormal:
            torch.set_flush_denormal(False)
        if previous_rng is not None:
            torch.random.set_rng_state(previous_rng)
