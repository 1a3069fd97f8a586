// binary16 conversions in integer arithmetic, bit for bit those of quant/fp16.h (round to nearest even, subnormals
// kept): packHalf2x16's rounding mode and a device's float16 denormal handling are the implementation's choice.
#ifndef MOETIER_HALF_GLSL
#define MOETIER_HALF_GLSL

// fp32_to_fp16: NaN -> quiet NaN, >= 65520 -> inf, subnormal results rounded to nearest even.
uint f16_bits(float f) {
  const uint x = floatBitsToUint(f);
  const uint sign = (x >> 16) & 0x8000u;
  const uint a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {
    // |f| < 2^-14: the result is |f| / 2^-24 rounded, m / 2^s for the 24-bit significand m; below 2^-25 it is 0.
    const uint e = a >> 23;
    if (e < 102u) return sign;
    const uint s = 126u - e;  // 14 .. 24
    const uint m = (a & 0x7fffffu) | 0x800000u;
    uint q = m >> s;
    const uint rem = m & ((1u << s) - 1u), half_ulp = 1u << (s - 1u);
    if (rem > half_ulp || (rem == half_ulp && (q & 1u) == 1u)) q += 1u;
    return sign | q;
  }
  // Rebias the exponent (-112 << 23, as a wrapping add) and round the 13 dropped bits to nearest even.
  return sign | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13);
}

// fp16_to_fp32: exact, subnormals included.
float f16_value(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31u) return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
  if (e != 0u) return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0u) return uintBitsToFloat(sign);
  // Subnormal: m * 2^-24, normalised.
  const int top = findMSB(m);  // 0 .. 9
  return uintBitsToFloat(sign | (uint(top + 103) << 23) | ((m << (23 - top)) & 0x7fffffu));
}

#endif
