// tiles_cuda/sm90/sm90.cuh -- everything of the Hopper (sm_90a) header library; compile with
// -gencode=arch=compute_90a,code=sm_90a (wgmma and setmaxnreg need the "a" target).
#pragma once
#include "common.cuh"
#include "tma.cuh"
#include "st.cuh"
#include "wgmma.cuh"
#include "pipeline.cuh"
// Host code that launches these kernels also includes tensor_map.h (tensor maps via the driver).
