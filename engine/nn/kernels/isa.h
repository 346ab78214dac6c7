// The instruction sets a kernel's code may use in this compilation, from the compiler's own macros:
// engine.nn.kernels.jit compiles each kernel once per ISA level with that level's -m flags (x86) or -march
// (ARM), plus -DAUDIOCPP_GENERIC for the portable level, which uses no intrinsics at all. Each kernel
// writes its portable code as the reference and its vector code under these macros; every level
// must give the portable code's numbers (the kernels' tests check it, natively and under qemu).
//
//   AUDIOCPP_AVX512_VNNI  AVX-512 F/BW/VL + VNNI (512-bit vpdpbusd)
//   AUDIOCPP_AVX512       AVX-512 F/BW/VL
//   AUDIOCPP_AVX_VNNI     AVX-VNNI (256-bit vpdpbusd of Intel's consumer cores) with AVX2
//   AUDIOCPP_AVX2         AVX2 + FMA + F16C
//   AUDIOCPP_NEON_DOTPROD ARMv8.2 sdot
//   AUDIOCPP_NEON         AArch64 Advanced SIMD
//
// Every build uses -ffp-contract=off: a multiply and an add are two roundings unless the code asks
// for a fused multiply-add (std::fma, _mm*_fmadd_ps, vfmaq_f32), so that no level fuses what another
// rounds twice.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if !defined(AUDIOCPP_GENERIC)
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define AUDIOCPP_AVX512 1
#if defined(__AVX512VNNI__)
#define AUDIOCPP_AVX512_VNNI 1
#endif
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define AUDIOCPP_AVX2 1
#if defined(__AVXVNNI__)
#define AUDIOCPP_AVX_VNNI 1
#endif
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#define AUDIOCPP_NEON 1
#if defined(__ARM_FEATURE_DOTPROD)
#define AUDIOCPP_NEON_DOTPROD 1
#endif
#endif
#endif

#if defined(AUDIOCPP_AVX2) || defined(AUDIOCPP_AVX512)
#include <immintrin.h>
#endif
#if defined(AUDIOCPP_NEON)
#include <arm_neon.h>
#endif

namespace audiocpp {

// The name of the code paths compiled in (what a kernel reports as its variant).
inline const char* compiled_isa() {
#if defined(AUDIOCPP_AVX512_VNNI)
  return "avx512_vnni";
#elif defined(AUDIOCPP_AVX512)
  return "avx512";
#elif defined(AUDIOCPP_AVX_VNNI)
  return "avx_vnni";
#elif defined(AUDIOCPP_AVX2)
  return "avx2";
#elif defined(AUDIOCPP_NEON_DOTPROD)
  return "neon_dotprod";
#elif defined(AUDIOCPP_NEON)
  return "neon";
#else
  return "generic";
#endif
}

// IEEE half -> float, exact (every half is a float): the portable form of F16C's vcvtph2ps.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
  if (exponent == 0x1fu) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exponent = 113u;
    while (!(mantissa & 0x400u)) { mantissa <<= 1; --exponent; }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float bf16_to_float(uint16_t v) {
  const uint32_t bits = (uint32_t)v << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// float -> bfloat16, round to nearest even, NaN to a quiet NaN (torch's conversion)
inline uint16_t float_to_bf16(float v) {
  if (std::isnan(v)) return 0x7fc0u;
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return (uint16_t)((bits + ((bits >> 16) & 1u) + 0x7fffu) >> 16);
}

}  // namespace audiocpp
