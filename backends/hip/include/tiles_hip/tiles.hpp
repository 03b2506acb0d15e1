// tiles_hip/tiles.hpp: the HipKittens-style tile library for CDNA3 (gfx942) and CDNA4 (gfx950).
#pragma once
#if defined(TILES_HIP_BARE) && !defined(TILES_EMU)
#include "prelude.hpp"
#endif
#include "arch.hpp"
#include "types.hpp"
#include "layout.hpp"
#include "regs.hpp"
#include "shared.hpp"
#include "global.hpp"
#include "mma.hpp"
#include "schedule.hpp"

#ifndef INFINITY
#define INFINITY __builtin_inff()
#endif
#ifndef NAN
#define NAN __builtin_nanf("")
#endif
