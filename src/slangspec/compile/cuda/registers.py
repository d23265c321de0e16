"""A bound on the registers a kernel takes a thread, so that a streaming multiprocessor holds
enough of its threads to hide memory latency.

Left alone, ptxas gives a kernel the registers its schedule wants: the backward kernel of a
function that holds many values at once (a struct of weights, an unrolled loop over an array)
takes 96 to 255, and a multiprocessor then runs 8 to 20 warps of it. These kernels wait on
memory and atomics, not arithmetic, and run faster with more warps and a few spilled values;
but under a bound ptxas spends registers up to it, so a bound given to every kernel would
lower the occupancy of small ones. A kernel over ``REGISTER_BUDGET`` after a first build is
therefore built once more, under ``__launch_bounds__`` that hold it to the budget, and the other
kernels of the same source come out as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REGISTER_BUDGET = 64
REGISTERS_PER_MULTIPROCESSOR = 65536
"""Every architecture NVRTC builds for, sm_50 on."""


def over_budget(registers: Mapping[str, int], groups: Mapping[str, int]) -> dict[str, int]:
    """Of the kernels ``groups`` names (with their threads per group), those that take more
    than the budget by ``registers`` (a cubin's ``kernel_registers``)."""
    return {
        name: group
        for name, group in groups.items()
        if registers.get(name, 0) > REGISTER_BUDGET
        and group * REGISTER_BUDGET <= REGISTERS_PER_MULTIPROCESSOR
    }


def bounded(text: str, kernels: Mapping[str, int]) -> str | None:
    """The CUDA source ``text`` with each kernel of ``kernels`` (by name, with its threads per
    group) declared under launch bounds that hold it to the budget; None where a kernel's
    declaration is not found once."""
    for name, group in kernels.items():
        blocks = REGISTERS_PER_MULTIPROCESSOR // (group * REGISTER_BUDGET)
        declaration = re.compile(rf'(extern "C" __global__ void )({re.escape(name)}\()')
        text, found = declaration.subn(rf"\g<1>__launch_bounds__({group}, {blocks}) \g<2>", text)
        if found != 1:
            return None
    return text
