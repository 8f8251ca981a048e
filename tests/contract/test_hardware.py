"""The kernel policy: what a launcher puts in a service's environment, and what a service says it runs."""

from __future__ import annotations

import pytest

from contract.hardware import (
    KERNELS_ENV,
    PINNED_KERNELS,
    KernelPolicyError,
    kernel_environment,
    kernel_policy,
    kernels_in_effect,
)


def test_native_is_the_default_and_a_wrong_word_is_one_line():
    assert kernel_policy({}) == "native" and kernel_policy({KERNELS_ENV: " Pinned "}) == "pinned"
    with pytest.raises(KernelPolicyError, match=r"NODEGROUND_KERNELS='fast': must be one of native, pinned"):
        kernel_policy({KERNELS_ENV: "fast"})


def test_pinned_sets_every_kernel_variable_and_native_clears_them():
    pinned = kernel_environment({KERNELS_ENV: "pinned", "PATH": "/bin"})
    assert {k: pinned[k] for k in PINNED_KERNELS} == PINNED_KERNELS and pinned["PATH"] == "/bin"
    assert kernels_in_effect(pinned) == "pinned"
    native = kernel_environment({"MKL_CBWR": "COMPATIBLE", "PATH": "/bin"})  # a user's leftover: costs stay native
    assert not set(PINNED_KERNELS) & set(native) and kernels_in_effect(native) == "native"


def test_a_service_with_some_kernel_variables_set_by_hand_says_custom():
    assert kernels_in_effect({"MKL_CBWR": "AVX2"}) == "custom"
    assert kernels_in_effect({}) == "native"
