// tiles_metal/tiles.h - the whole library: ThunderMittens-style tiles on Apple's 8x8 simdgroup_matrix.
#pragma once
#include "base.h"
#include "types.h"
#include "elements.h"
#include "memory.h"
#include "maps.h"
#include "reductions.h"
#include "mma.h"
#include "philox.h"
