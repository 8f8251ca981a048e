"""The device a service computes on and what it runs with, as Describe reports them: the hardware, CUDA stack and
libraries the records name for a trial; and the GPU memory a finished or failed call gives back."""

from __future__ import annotations

import ctypes
import functools
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from contract.hardware import cpu_model, kernels_in_effect

_REPORTED_LIBRARIES = ("torch", "torch_geometric", "numpy", "scipy", "grpcio", "protobuf")


def library_versions() -> dict[str, str]:
    versions = {}
    for name in _REPORTED_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def nvidia_driver_version(
    proc_version: Path = Path("/proc/driver/nvidia/version"), nvml: str = "libnvidia-ml.so.1"
) -> str:
    """The NVIDIA driver's version, from NVML (mapped into GPU containers), else the kernel module; "" if neither."""
    try:
        library = ctypes.CDLL(nvml)
        if library.nvmlInit_v2() == 0:
            buffer = ctypes.create_string_buffer(96)
            ok = library.nvmlSystemGetDriverVersion(buffer, len(buffer)) == 0
            library.nvmlShutdown()
            if ok and buffer.value:
                return buffer.value.decode()
    except (OSError, AttributeError):
        pass
    try:
        match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", proc_version.read_text())
        return match.group(1) if match else ""
    except OSError:
        return ""


def device_fields(device: torch.device) -> dict[str, Any]:
    """DescribeResponse's device fields: what the records name as the hardware and CUDA stack of a trial.

    The CPU model, the threads torch computes with and the kernels its libraries run (``contract.hardware``) are what
    a CPU trial's cost depends on (the estimate prices per hardware); a GPU's name and memory, a GPU trial's. The
    threads and kernels are read on every call: a process that runs methods in-process (``nodeground.run``) sets its
    threads for a run, and may run another with other threads.
    """
    return {**_hardware_fields(device), "compute_threads": torch.get_num_threads(), "kernels": kernels_in_effect()}


@functools.lru_cache(maxsize=8)  # the driver is asked once per device, not on every Describe
def _hardware_fields(device: torch.device) -> dict[str, Any]:
    fields: dict[str, Any] = {"device": str(device), "cuda_version": torch.version.cuda or "", "cpu_model": cpu_model()}
    if device.type == "cuda":
        fields["device_name"] = torch.cuda.get_device_name(device)
        fields["driver_version"] = nvidia_driver_version()
        fields["device_memory_bytes"] = int(torch.cuda.get_device_properties(device).total_memory)
    return fields


def free_gpu() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
