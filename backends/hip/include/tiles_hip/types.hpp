// tiles_hip/types.hpp: element types and conversions (round to nearest even, as the hardware does).
#pragma once
#include "arch.hpp"

namespace tiles_hip {
template <class T> struct is_fp8 { static constexpr bool value = false; };
template <> struct is_fp8<fp8e4m3> { static constexpr bool value = true; };
template <> struct is_fp8<fp8e5m2> { static constexpr bool value = true; };
// CDNA3's matrix cores read fp8 as the FNUZ formats: every OCP value as half itself, 0x80 (OCP -0) as NaN.
// mma.hpp runs the accumulator scaled by 1/4; -0 is cleared where an fp8 value enters LDS (global.hpp's
// fills and stores) or a register A operand, so each element once, not at every MFMA that reads it.
template <class T> struct fnuz {
#if defined(TILES_GFX950)
  static constexpr bool value = false;
#else
  static constexpr bool value = is_fp8<T>::value;
#endif
};
// OCP -0 (0x80) -> +0 in N bytes, four at a time: a byte of w ^ 0x80808080 is zero exactly where w held 0x80.
template <int N> TILES_DEV void clear_negative_zero(void* x) {
  static_assert(N % 4 == 0, "cleared in whole words");
  TILES_UNROLL for (int i = 0; i < N / 4; ++i) {
    uint32_t w;
    __builtin_memcpy(&w, (uint8_t*)x + 4 * i, 4);
    const uint32_t y = w ^ 0x80808080u;
    const uint32_t nonzero = (((y & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | y) & 0x80808080u;  // high bit per nonzero byte
    w &= (nonzero >> 7) * 0xFFu;
    __builtin_memcpy((uint8_t*)x + 4 * i, &w, 4);
  }
}

// f32 -> OCP fp8 (E4M3: bias 7, max 448, saturating; E5M2: bias 15, overflows to inf), nearest even.
// Written in plain C++ so that both paths round identically.
template <int EXP, int MAN> TILES_DEV uint8_t f32_to_fp8(float f, float maxv) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  uint8_t sign = (u >> 24) & 0x80;
  if (f != f) return sign | (EXP == 4 ? 0x7F : 0x7E);
  float a = f < 0 ? -f : f;
  if (EXP == 4 && a > maxv) a = maxv;  // E4M3 saturates (no infinity), as in tiles.dtypes
  constexpr int bias = (1 << (EXP - 1)) - 1;
  constexpr float min_normal = 1.0f / (1 << (bias - 1));
  // quantum of the binade of a (subnormals share the smallest normal binade's quantum)
  float q = min_normal / (1 << MAN);
  if (a >= min_normal) {
    int e = ((__builtin_bit_cast(uint32_t, a) >> 23) & 0xFF) - 127;
    q = __builtin_bit_cast(float, (uint32_t)(e - MAN + 127) << 23);
  }
  float r = __builtin_rintf(a / q) * q;  // rint: nearest even under the default rounding mode
  if (r > maxv) return sign | (EXP == 4 ? 0x7E : 0x7C);  // E4M3: max finite; E5M2: infinity
  if (r == 0) return sign;
  uint32_t ru = __builtin_bit_cast(uint32_t, r);
  int e = ((ru >> 23) & 0xFF) - 127;
  if (r < min_normal) return sign | (uint8_t)(r / (min_normal / (1 << MAN)));
  return sign | (uint8_t)((e + bias) << MAN) | (uint8_t)((ru >> (23 - MAN)) & ((1 << MAN) - 1));
}
template <int EXP, int MAN> TILES_DEV float fp8_to_f32(uint8_t b) {
  constexpr int bias = (1 << (EXP - 1)) - 1;
  int e = (b >> MAN) & ((1 << EXP) - 1), m = b & ((1 << MAN) - 1);
  float mag = e == 0 ? (float)m / (1 << MAN) / (1 << (bias - 1))
                     : __builtin_ldexpf(1.0f + (float)m / (1 << MAN), e - bias);
  return b & 0x80 ? -mag : mag;
}

template <class T> struct cvt {
  TILES_DEV static T from(float f) { return (T)f; }
  TILES_DEV static float to(T x) { return (float)x; }
};
#if defined(TILES_EMU)
template <> struct cvt<bf16> {  // round to nearest even, NaN kept quiet: what v_cvt_pk_bf16_f32 does
  static bf16 from(float f) {
    uint32_t u = __builtin_bit_cast(uint32_t, f);
    if (f != f) return bf16{(uint16_t)((u >> 16) | 0x40)};
    return bf16{(uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16)};
  }
  static float to(bf16 x) { return __builtin_bit_cast(float, (uint32_t)x.bits << 16); }
};
#endif
template <> struct cvt<fp8e4m3> {
  TILES_DEV static fp8e4m3 from(float f) { return {f32_to_fp8<4, 3>(f, 448.0f)}; }
  TILES_DEV static float to(fp8e4m3 x) { return fp8_to_f32<4, 3>(x.bits); }
};
template <> struct cvt<fp8e5m2> {
  TILES_DEV static fp8e5m2 from(float f) { return {f32_to_fp8<5, 2>(f, 57344.0f)}; }
  TILES_DEV static float to(fp8e5m2 x) { return fp8_to_f32<5, 2>(x.bits); }
};
// Every register-tile op computes in f32 and rounds once into the destination type.
template <class D, class S> TILES_DEV D convert(S x) {
  if constexpr (__is_same(D, S)) return x;
  else return cvt<D>::from(cvt<S>::to(x));
}

TILES_DEV int tiles_cdiv(int a, int b) { return (a + b - 1) / b; }
TILES_DEV int tiles_min(int a, int b) { return a < b ? a : b; }
TILES_DEV int tiles_max(int a, int b) { return a > b ? a : b; }
TILES_DEV float tiles_min(float a, float b) { return __builtin_fminf(a, b); }
TILES_DEV float tiles_max(float a, float b) { return __builtin_fmaxf(a, b); }
// tl.grid(group=g)'s order (tiles/cgen.py): the block at position `id` of the launch order takes row and column
// (axes 0 and 1) column by column within groups of `group` rows, the last group shorter where rows run out.
TILES_DEV int tiles_group_row(int id, int rows, int cols, int group) {
  const int first = id / (group * cols) * group, height = tiles_min(rows - first, group);
  return first + id % (group * cols) % height;
}
TILES_DEV int tiles_group_col(int id, int rows, int cols, int group) {
  const int first = id / (group * cols) * group, height = tiles_min(rows - first, group);
  return id % (group * cols) / height;
}
}  // namespace tiles_hip
