"""tiles.backends.hip: AMD CDNA3 (gfx942) and CDNA4 (gfx950) through HIP, HipKittens style.

Registers "hip" (an AMD GPU through hip-python, when one is present) and "hip-emu:gfx942",
"hip-emu:gfx950" (the generated HIP executed on the CPU). Imports nothing heavy.
"""
from tiles import backend

from .emu import HipEmu
from .runtime import Hip

for _t in ("gfx942", "gfx950"):
    backend.register(HipEmu(_t))
backend.register(Hip())
