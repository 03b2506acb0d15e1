// tiles_metal/philox.h - tl.dropout: the keep mask from Philox 4x32-10, keyed exactly as tiles/philox.py says
// (counter = (col / 4, row, offset, 0), key = (seed, 0), 24 bits of word col % 4), so every backend drops the
// same elements. The mask needs each element's (row, col): map_positions (elements.h).
#pragma once
#include "elements.h"

namespace tiles_metal {

// The uniform in [0, 1) of global element (row, col).
inline float philox_uniform(uint seed, uint offset, uint row, uint col) {
    uint c0 = col / 4, c1 = row, c2 = offset, c3 = 0, k0 = seed, k1 = 0;
    for (int r = 0; r < 10; ++r) {
        const uint hi0 = mulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const uint hi1 = mulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;  // the key schedule (Weyl increments); the last round's update is never used
        k1 += 0xBB67AE85u;
    }
    const uint words[4] = {c0, c1, c2, c3};
    return float(words[col % 4] >> 8) * 5.9604644775390625e-8f;  // 2^-24
}

struct dropout_mask {
    uint seed, offset;
    int row0, col0;  // the tile's first element in the global index space of the generator
    float p, scale;
    float operator()(float x, int r, int c) const {
        return philox_uniform(seed, offset, uint(row0 + r), uint(col0 + c)) >= p ? x * scale : 0.0f;
    }
};

// dst = src / (1 - p) where the element's uniform is >= p, else 0. row0: this simdgroup's first row.
template <typename T, int R, int C>
inline void dropout(thread rt<T, R, C>& dst, const thread rt<T, R, C>& src, float p, int seed, int offset, int row0,
                    int col0, const thread block& b) {
    dropout_mask f;
    f.seed = uint(seed);
    f.offset = uint(offset);
    f.row0 = row0;
    f.col0 = col0;
    f.p = p;
    f.scale = 1.0f / (1.0f - p);
    map_positions(dst, src, f, b);
}

}  // namespace tiles_metal
