"""The hardware a service computes on, as both sides name it: the CPU model, and the kernels its libraries run.

**Kernels.** The numeric libraries pick their kernels by the CPU at run time (ATen's vector width, MKL's and oneDNN's
code paths, OpenBLAS's core kernels, NumPy's AVX-512 loops). ``NODEGROUND_KERNELS`` chooses how a service runs them:

- ``native`` (the default): the fastest kernels this CPU has, the ones a user's own code runs. Every cost is measured
  so. A run reruns to itself bit for bit on the same CPU model with the same library versions; on another CPU its
  kernels round differently in the last bits, which a few hundred epochs of early stopping can turn into another
  best epoch (the configurations and the selection mostly agree; metrics within the golden tolerance).
- ``pinned``: each library on a path every x86-64 CPU of the last decade has (AVX2), so a run reruns to itself bit
  for bit on any such CPU, Intel or AMD. A reproducibility tool for golden records and rerun checks, never the
  setting of a cost: one-thread GEMM ran at 20 GMAC/s pinned against 42-51 native on a 2-core AMD EPYC (115 on an
  AVX-512 Intel Xeon), and the slowdown differs by method.

Each variable only selects among a library's own kernels, and each is read when the library loads: a launcher puts
them in a service's environment before it starts (``kernel_environment``), and a service reports what it runs with
(``kernels_in_effect``), which every record's hardware line names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from contract.errors import UserError

CPUINFO = Path("/proc/cpuinfo")
KERNELS_ENV = "NODEGROUND_KERNELS"
NATIVE, PINNED = "native", "pinned"
KERNEL_POLICIES = (NATIVE, PINNED)
CUSTOM = "custom"  # some kernel variables set by hand, not the pinned set: what a service reports then
PINNED_KERNELS: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
}


class KernelPolicyError(ValueError, UserError):
    """``NODEGROUND_KERNELS`` names no policy."""


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """This host's CPU model as the kernel names it ("" where it does not say)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith(("model name", "Model")):  # x86 and most ARM kernels
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def kernel_policy(environ: Mapping[str, str] | None = None) -> str:
    """The policy ``NODEGROUND_KERNELS`` asks for (``native`` where unset); KernelPolicyError for another word."""
    value = (os.environ if environ is None else environ).get(KERNELS_ENV, "").strip().lower() or NATIVE
    if value not in KERNEL_POLICIES:
        raise KernelPolicyError(f"{KERNELS_ENV}={value[:40]!r}: must be one of {', '.join(KERNEL_POLICIES)}")
    return value


def kernel_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` for a service under its policy: the pinned variables set, or (native) every one of them removed."""
    policy = kernel_policy(environ)
    cleared = {k: v for k, v in environ.items() if k not in PINNED_KERNELS}
    return {**cleared, **PINNED_KERNELS, KERNELS_ENV: policy} if policy == PINNED else {**cleared, KERNELS_ENV: policy}


def kernels_in_effect(environ: Mapping[str, str] | None = None) -> str:
    """What this process's kernels are: ``pinned`` (the whole pinned set), ``native`` (none of it), else ``custom``."""
    env = os.environ if environ is None else environ
    if all(env.get(k) == v for k, v in PINNED_KERNELS.items()):
        return PINNED
    return NATIVE if not any(env.get(k) for k in PINNED_KERNELS) else CUSTOM
