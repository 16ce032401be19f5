// A bfloat16 value as its bits (uint16_t) and back: the scalar conversions the element-wise kernels and
// the native decode step share. GCC vectorises these integer shifts in the loops that call them, not
// at::BFloat16's own conversions. No #include here: the including file has <cstring>, and may include
// this inside a target region of its own.

// The float32 a bfloat16 is: its bits in the top half.
inline float bf16_bits_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof(f));
  return f;
}

// A float32 rounded to the nearest bfloat16, ties to even, as PyTorch casts; a NaN stays a NaN.
inline uint16_t float_to_bf16_bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return v != v ? uint16_t{0x7fc0} : static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}
