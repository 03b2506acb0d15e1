// tiles_hip/schedule.hpp: the pieces of the CDNA schedules that are not plain tile ops.
//
// 8-wave ping-pong (512 threads, 2 waves per SIMD): waves 0-3 and 4-7 form two groups; group 1 enters
// the main loop one barrier late, so while one group is in its MFMA cluster the other is in its
// memory cluster, and every cluster ends at a block barrier. The generated loop is
//     pingpong_enter();  for (k) { memory cluster; barrier(); mfma_cluster_begin(); ...; mfma_cluster_end();
//                                   barrier(); }  pingpong_leave();
// 4-wave interleave (256 threads, one wave per SIMD owning all 512 registers): each MFMA followed by LDS reads
// and vector work, asked of the scheduler by mma itself (mma.hpp's interleaved<VALU>).
#pragma once
#include "arch.hpp"

namespace tiles_hip {
TILES_DEV int pingpong_group() { return arch::wave_id() / 4; }
TILES_DEV void pingpong_enter() {
  if (pingpong_group() == 1) arch::barrier();
}
TILES_DEV void pingpong_leave() {
  if (pingpong_group() == 0) arch::barrier();
}
// The MFMA cluster runs at raised priority: the arbiter then prefers the group doing math, and the
// other group's loads fill the gaps.
TILES_DEV void mfma_cluster_begin() { arch::setprio<1>(); }
TILES_DEV void mfma_cluster_end() { arch::setprio<0>(); }
// Chiplet-aware grid order. The dispatcher deals workgroups round-robin to the XCDs (8 on MI300/MI355),
// each with its own L2. xcd_order gives XCD x a contiguous chunk of the launch order (block `id` of `n`), so that
// the blocks one XCD runs at once are neighbours; chiplet_order then walks output tiles in windows of WINDOW rows
// (tiles of one window share A rows and B columns in that XCD's L2).
template <int XCDS> TILES_DEV int xcd_order(int id, int n) {
  return n % XCDS == 0 ? (id % XCDS) * (n / XCDS) + id / XCDS : id;
}
struct grid_pos { int x, y; };
template <int XCDS, int WINDOW> TILES_DEV grid_pos chiplet_order(int bx, int by, int nx, int ny) {
  const int order = xcd_order<XCDS>(by * nx + bx, nx * ny);
  return {tiles_group_row(order, nx, ny, WINDOW), tiles_group_col(order, nx, ny, WINDOW)};
}
}  // namespace tiles_hip
