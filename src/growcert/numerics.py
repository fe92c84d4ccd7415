"""Portable numerics: the CPU kernels of torch, MKL and oneDNN pinned to one instruction set, so that a run's
numbers are the same bit for bit on any x86-64 CPU with AVX2 (docs/science.md, "Reproducing on another machine").

Torch, MKL and oneDNN each pick their CPU code by the CPU they find (AVX-512 here, AVX2 on an older node), and the
last bits of a sum depend on that code; grokking turns a last-bit difference into thousands of steps. Each library
reads one environment variable, once, when it first runs a kernel:

    ATEN_CPU_CAPABILITY   torch's vectorised kernels (default | avx2 | avx512), read at the first dispatch
    MKL_CBWR              MKL's conditional numerical reproducibility code path (AVX2,STRICT: the AVX2 path, bitwise
                          equal on every CPU that has AVX2), read when MKL starts
    ONEDNN_MAX_CPU_ISA    the newest instruction set oneDNN's JIT (convolutions) may use, read at its first primitive

So they are set in the job's environment before the process starts (rules/common.smk exports them in every rule's
shell), and `growcert`'s entry point sets them again before anything imports torch (a command run by hand with
GROWCERT_NUMERICS=portable). `check` fails a job whose torch runs other kernels than the pins say (torch loaded
before the pins, or a CPU without AVX2). The config key `numerics` (portable | native) chooses; native leaves
each library to choose by the CPU, as torch does by default. On CUDA, runtime.py's deterministic cuBLAS setting
stays as it is: GPU kernels differ between GPU models whatever is pinned here.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from growcert.errors import ConfigError

MODES = ("portable", "native")
MODE_VARIABLE = "GROWCERT_NUMERICS"  # the job's mode, exported by the rules' shell (rules/common.smk)
PORTABLE = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PORTABLE_CAPABILITY = "AVX2"  # what torch.backends.cpu.get_cpu_capability() says under the pins
KERNEL_VARIABLES = tuple(PORTABLE)


def check_mode(mode: str, key: str = "config key 'numerics'") -> str:
    if mode not in MODES:
        raise ConfigError(f"{key}: {mode!r} is not one of {', '.join(MODES)}")
    return mode


def job_environment(mode: str) -> dict[str, str]:
    """The environment variables a job runs with under `mode`: the mode, and under portable the kernel pins."""
    return {MODE_VARIABLE: check_mode(mode), **(PORTABLE if mode == "portable" else {})}


def shell_exports(mode: str) -> str:
    """`export VAR=value ...; `: the job environment of `mode` as a shell prefix (rules/common.smk)."""
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in job_environment(mode).items()) + "; "


def current_mode(environ: MutableMapping[str, str] = os.environ) -> str:
    """The mode this process runs under: GROWCERT_NUMERICS, native when unset."""
    return check_mode(environ.get(MODE_VARIABLE, "native"), f"environment variable {MODE_VARIABLE}")


def apply(environ: MutableMapping[str, str] = os.environ) -> str:
    """Set the kernel pins of this process's mode in `environ` (overriding what the node preset), before torch
    loads; returns the mode. Under native nothing is changed."""
    mode = current_mode(environ)
    if mode == "portable":
        environ.update(PORTABLE)
    return mode


def cpu_model() -> str:
    """The CPU's model name, from the OS (platform.processor() is empty on Linux)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def record() -> dict[str, Any]:
    """What made this process's numbers: the mode, the CPU model, torch's CPU capability as used ("torch not
    loaded" in a process that never imported it) and the MKL and oneDNN settings it ran with."""
    torch = sys.modules.get("torch")
    return {
        "numerics": current_mode(),
        "cpu_model": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability() if torch is not None else "torch not loaded",
        "mkl_cbwr": os.environ.get("MKL_CBWR", "unset"),
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "unset"),
    }


def kernels(numbers: dict[str, Any]) -> dict[str, Any]:
    """The part of a `record` that decides the kernels: under portable the pins alone (any CPU with AVX2 gives
    the same code); under native the CPU model too, which is what chooses there."""
    keys = ["numerics", "cpu_capability", "mkl_cbwr", "onednn_max_cpu_isa"]
    return {key: numbers.get(key) for key in keys + ([] if numbers.get("numerics") == "portable" else ["cpu_model"])}


def check() -> dict[str, Any]:
    """This process's `record`, after a ConfigError when portable numerics are asked for and torch runs other
    kernels than the pins (torch was imported before `apply`, or this CPU has no AVX2)."""
    numbers = record()
    if numbers["numerics"] == "portable" and numbers["cpu_capability"] not in (PORTABLE_CAPABILITY, "torch not loaded"):
        raise ConfigError(
            f"numerics: portable pins torch's {PORTABLE_CAPABILITY} kernels, but torch runs "
            f"{numbers['cpu_capability']} kernels here (CPU: {numbers['cpu_model']}): torch was loaded "
            f"before the pins were set, or this CPU lacks AVX2; run with numerics: native"
        )
    return numbers
