// e^x on 16 floats, to about one float32 rounding: x = n ln2 + r with |r| <= ln2/2, e^r from its Taylor
// series to r^7 (truncation below 1e-8 there), times 2^n. Below -104 it is zero, above 88.8 infinity,
// and a NaN passes through. Included inside an AVX-512 target region (no #include here: the including
// file has <immintrin.h>).
inline __m512 exp_avx512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.f), x);  // e^-104 rounds to zero anyway; a NaN is the second operand
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), x);    // 2^128 times e^r: infinity
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln2 in two parts: the first exact in n
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.f / 5040);
  for (const float coefficient : {1.f / 720, 1.f / 120, 1.f / 24, 1.f / 6, 1.f / 2, 1.f, 1.f}) {
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(coefficient));
  }
  return _mm512_scalef_ps(p, n);
}
