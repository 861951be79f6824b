// C reference for the kernel benchmark, one thread, over u16 digital numbers. Five loops:
//  - "checked": the service's semantics (DN 0 is no-data, x/0 is NaN); gcc does not vectorise it;
//  - "plain": (n - r) / (n + r) with no checks, which gcc vectorises (the figure usually quoted);
//  - "fused": NDVI with its statistics in one pass, no values stored: count, min, max, sum and sum
//    of squares in double over the valid pixels (DN 0 is no-data). Even with -ffast-math gcc does
//    not vectorise it;
//  - "fused SIMD 128" and "fused SIMD 256": the same, vectorised by hand with the algorithm of the
//    service's JIT (src/compute/jit/: integer NDVI on the DNs, NaN lanes zeroed, min/max in
//    float, sums of x - K and (x - K)^2 in double lanes), on 128-bit vectors (SSE4.1: the width
//    of WebAssembly SIMD) and on 256-bit vectors (AVX2; 0 when the CPU has none).
// Built and run by bench/kernel.ts when gcc is present, twice: with -O3 alone (the x86-64
// baseline, SSE2: what "a C -O3 loop" compiles to) and with -O3 -march=native (AVX2 here):
//   gcc -O3 -o dist/bench/ndvi-o3 bench/c/ndvi.c -lm && dist/bench/ndvi-o3 10000000
//   gcc -O3 -march=native -o dist/bench/ndvi-native bench/c/ndvi.c -lm && dist/bench/ndvi-native 10000000
// It prints: pixels, then the best ms of each loop (checked, plain, fused, fused SIMD 128, fused
// SIMD 256), then a checksum.
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

typedef struct {
  long cnt;
  float mn, mx;
  double s, q;
} Stats;

typedef Stats (*FusedLoop)(const uint16_t *red, const uint16_t *nir, long n, double k);

// The statistics from the vector accumulators, stored lane by lane: c (the 16-bit lanes count -1
// per pixel without a value), the float lanes of min and max, the double lanes of the shifted sums.
// `done` pixels were processed (a tail of n % 8 is left out: the benchmark's n are multiples of 8).
static Stats finish(const short c[8], const float *mn, const float *mx, int lanes, const double *s, const double *q, int dlanes, long done, double k) {
  long bad = 0;
  Stats r = {0, INFINITY, -INFINITY, 0, 0};
  for (int l = 0; l < 8; l++) bad -= c[l];
  for (int l = 0; l < lanes; l++) r.mn = fminf(r.mn, mn[l]), r.mx = fmaxf(r.mx, mx[l]);
  for (int l = 0; l < dlanes; l++) r.s += s[l], r.q += q[l];
  r.cnt = done - bad;
  r.s += bad * k; // the lanes without a value added 0 - K and K^2
  r.q -= bad * k * k;
  return r;
}

__attribute__((target("sse4.1"))) static Stats fused128(const uint16_t *red, const uint16_t *nir, long n, double k) {
  __m128i zero = _mm_setzero_si128(), cnt = zero;
  __m128 mn = _mm_set1_ps(INFINITY), mx = _mm_set1_ps(-INFINITY);
  __m128d kd = _mm_set1_pd(k), s = _mm_setzero_pd(), q = _mm_setzero_pd();
  long i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i a = _mm_loadu_si128((const __m128i *)(nir + i)), b = _mm_loadu_si128((const __m128i *)(red + i));
    __m128i bad = _mm_cmpeq_epi16(_mm_min_epu16(a, b), zero);
    a = _mm_andnot_si128(bad, a);
    b = _mm_andnot_si128(bad, b);
    cnt = _mm_add_epi16(cnt, bad);
    for (int h = 0; h < 2; h++) {
      __m128i ea = h ? _mm_unpackhi_epi16(a, zero) : _mm_cvtepu16_epi32(a);
      __m128i eb = h ? _mm_unpackhi_epi16(b, zero) : _mm_cvtepu16_epi32(b);
      __m128 x = _mm_div_ps(_mm_cvtepi32_ps(_mm_sub_epi32(ea, eb)), _mm_cvtepi32_ps(_mm_add_epi32(ea, eb)));
      __m128i b32 = h ? _mm_srai_epi32(_mm_unpackhi_epi16(bad, bad), 16) : _mm_cvtepi16_epi32(bad);
      mn = _mm_min_ps(x, mn); // x NaN: mn
      mx = _mm_max_ps(x, mx);
      __m128 xk = _mm_andnot_ps(_mm_castsi128_ps(b32), x);
      __m128d d0 = _mm_sub_pd(_mm_cvtps_pd(xk), kd), d1 = _mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(xk, xk)), kd);
      s = _mm_add_pd(s, _mm_add_pd(d0, d1));
      q = _mm_add_pd(q, _mm_add_pd(_mm_mul_pd(d0, d0), _mm_mul_pd(d1, d1)));
    }
  }
  short c[8];
  float m4[4], x4[4];
  double s2[2], q2[2];
  _mm_storeu_si128((__m128i *)c, cnt);
  _mm_storeu_ps(m4, mn);
  _mm_storeu_ps(x4, mx);
  _mm_storeu_pd(s2, s);
  _mm_storeu_pd(q2, q);
  return finish(c, m4, x4, 4, s2, q2, 2, i, k);
}

__attribute__((target("avx2"))) static Stats fused256(const uint16_t *red, const uint16_t *nir, long n, double k) {
  __m128i zero = _mm_setzero_si128(), cnt = zero;
  __m256 mn = _mm256_set1_ps(INFINITY), mx = _mm256_set1_ps(-INFINITY);
  __m256d kd = _mm256_set1_pd(k), s = _mm256_setzero_pd(), q = _mm256_setzero_pd();
  long i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i a = _mm_loadu_si128((const __m128i *)(nir + i)), b = _mm_loadu_si128((const __m128i *)(red + i));
    __m128i bad = _mm_cmpeq_epi16(_mm_min_epu16(a, b), zero);
    a = _mm_andnot_si128(bad, a);
    b = _mm_andnot_si128(bad, b);
    cnt = _mm_add_epi16(cnt, bad);
    __m256i ea = _mm256_cvtepu16_epi32(a), eb = _mm256_cvtepu16_epi32(b);
    __m256 x = _mm256_div_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(ea, eb)), _mm256_cvtepi32_ps(_mm256_add_epi32(ea, eb)));
    mn = _mm256_min_ps(x, mn);
    mx = _mm256_max_ps(x, mx);
    __m256 xk = _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_cvtepi16_epi32(bad)), x);
    __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xk)), kd);
    __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xk, 1)), kd);
    s = _mm256_add_pd(s, _mm256_add_pd(d0, d1));
    q = _mm256_add_pd(q, _mm256_add_pd(_mm256_mul_pd(d0, d0), _mm256_mul_pd(d1, d1)));
  }
  short c[8];
  float m8[8], x8[8];
  double s4[4], q4[4];
  _mm_storeu_si128((__m128i *)c, cnt);
  _mm256_storeu_ps(m8, mn);
  _mm256_storeu_ps(x8, mx);
  _mm256_storeu_pd(s4, s);
  _mm256_storeu_pd(q4, q);
  return finish(c, m8, x8, 8, s4, q4, 4, i, k);
}

// Runs one fused loop, keeps its best time, adds its statistics to the checksum.
static void timeFused(FusedLoop f, const uint16_t *red, const uint16_t *nir, long n, double *best, double *sum) {
  double t = now_ms();
  Stats st = f(red, nir, n, 0.5);
  double d = now_ms() - t;
  if (d < *best) *best = d;
  *sum += st.cnt + st.mn + st.mx + st.s / st.cnt + st.q / st.cnt;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  int reps = n > 1000000 ? 20 : 20000;
  uint16_t *red = malloc(n * 2), *nir = malloc(n * 2);
  float *out = malloc(n * 4);
  for (long i = 0; i < n; i++) {
    red[i] = 300 + (i * 7) % 3000;
    nir[i] = 2000 + (i * 13) % 4000;
  }
  double best = 1e30, plain = 1e30, fused = 1e30, simd128 = 1e30, simd256 = 1e30, sum = 0;
  int avx2 = __builtin_cpu_supports("avx2");
  for (int r = 0; r < reps; r++) {
    double t = now_ms();
    for (long i = 0; i < n; i++) {
      float x = nir[i] * 0.0001f, y = red[i] * 0.0001f, s = x + y;
      out[i] = (red[i] == 0 || nir[i] == 0 || s == 0) ? NAN : (x - y) / s;
    }
    double d = now_ms() - t;
    if (d < best) best = d;
    sum += out[r % n];
    t = now_ms();
    for (long i = 0; i < n; i++) {
      float x = nir[i] * 0.0001f, y = red[i] * 0.0001f;
      out[i] = (x - y) / (x + y);
    }
    d = now_ms() - t;
    if (d < plain) plain = d;
    sum += out[(r * 7) % n];
    t = now_ms();
    long cnt = 0;
    float mn = INFINITY, mx = -INFINITY;
    double s1 = 0, s2 = 0;
    for (long i = 0; i < n; i++) {
      if (red[i] == 0 || nir[i] == 0) continue;
      float x = nir[i] * 0.0001f, y = red[i] * 0.0001f, v = (x - y) / (x + y);
      cnt++;
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
      s1 += v;
      s2 += (double)v * v;
    }
    d = now_ms() - t;
    if (d < fused) fused = d;
    sum += cnt + mn + mx + s1 / cnt + s2 / cnt;
    timeFused(fused128, red, nir, n, &simd128, &sum);
    if (avx2) timeFused(fused256, red, nir, n, &simd256, &sum);
  }
  printf("%ld %.6f %.6f %.6f %.6f %.6f %f\n", n, best, plain, fused, simd128, avx2 ? simd256 : 0.0, sum);
  return 0;
}
