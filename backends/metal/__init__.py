"""Apple GPUs through Metal, ThunderMittens style: MSL headers over 8x8 simdgroup matrices (include/tiles_metal),
codegen from the IR, a double-buffered threadgroup schedule, an offline toolchain and a PyObjC runtime.

Registers two backends: "metal" (an Apple GPU, macOS only) and "metal-emu" (the same generated MSL compiled for
the host with tiles/emu/include/metal_emu.h and run lanes-as-fibers on the CPU). Nothing heavy is imported here.
"""
from tiles.backend import register

from .emulator import MetalEmu
from .runtime import MetalDevice

register(MetalDevice())
register(MetalEmu())
