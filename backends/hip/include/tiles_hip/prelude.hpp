// tiles_hip/prelude.hpp: the few HIP keywords a kernel needs, for compiling with bare clang
// (`-x hip -nogpulib -nogpuinc`, no ROCm install). hiprtc and hipcc define these themselves,
// so tiles.hpp includes this file only when TILES_HIP_BARE is set by backends/hip/toolchain.py.
#pragma once
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __launch_bounds__(threads, ...) __attribute__((amdgpu_flat_work_group_size(1, threads)))
