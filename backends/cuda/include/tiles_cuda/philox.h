// tiles_cuda/philox.h: Philox 4x32-10 (Salmon et al., SC'11), the counter-based generator tiles/philox.py
// defines for tl.dropout. Plain C++ (no CUDA vector types) so that one copy of the rounds serves the CUDA
// headers (ops.cuh), the HIP headers (tiles_hip/regs.hpp, also on the CPU emulator) and host builds.
// Every includer defines __host__ / __device__ (CUDA, HIP, tiles_hip/prelude.hpp, hip_emu.h).
#pragma once

namespace tiles_philox {
struct words {
    unsigned x, y, z, w;
};

__host__ __device__ inline words philox4x32_10(words c, unsigned k0, unsigned k1) {
    for (int r = 0; r < 10; ++r) {
        const unsigned long long p0 = 0xD2511F53ull * c.x, p1 = 0xCD9E8D57ull * c.z;  // 32 x 32 -> 64 bits
        c = words{unsigned(p1 >> 32) ^ c.y ^ k0, unsigned(p1), unsigned(p0 >> 32) ^ c.w ^ k1, unsigned(p0)};
        k0 += 0x9E3779B9u;  // the key schedule (its last step is never used)
        k1 += 0xBB67AE85u;
    }
    return c;
}

// Output word i (0..3) of a Philox evaluation.
__host__ __device__ inline unsigned word(const words& w, unsigned i) {
    return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w;
}

// Dropout keeps an element whose uniform u = (word >> 8) * 2^-24 (24 bits, exact in f32) is >= p.
__host__ __device__ inline bool keep(unsigned word, float p) { return float(word >> 8) * 0x1p-24f >= p; }

// The keep decision of global element (row, col): counter (col / 4, row, offset, 0), key (seed, 0), word col % 4.
__host__ __device__ inline bool keep_at(unsigned row, unsigned col, float p, unsigned seed, unsigned offset) {
    return keep(word(philox4x32_10(words{col / 4, row, offset, 0u}, seed, 0u), col % 4), p);
}
}  // namespace tiles_philox
