// tiles_cuda/tiles.cuh: the whole header library. Generated kernels include this one file.
#pragma once
#include "base.cuh"
#include "types.cuh"
#include "memory.cuh"
#include "mma.cuh"
#include "mma_block.cuh"
#include "ops.cuh"
#include "pipeline.cuh"
