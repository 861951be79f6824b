// C reference for the kernel benchmark, one thread, over u16 digital numbers. Three loops:
//  - "checked": the service's semantics (DN 0 is no-data, x/0 is NaN); gcc does not vectorise it;
//  - "plain": (n - r) / (n + r) with no checks, which gcc vectorises (the figure usually quoted);
//  - "fused": NDVI with its statistics in one pass, no values stored: count, min, max, sum and sum
//    of squares in double over the valid pixels (DN 0 is no-data). Without -ffast-math gcc keeps
//    the double sums in order and does not vectorise them.
// Built and run by bench/kernel.ts when gcc is present:
//   gcc -O3 -march=native -o dist/bench/ndvi bench/c/ndvi.c -lm && dist/bench/ndvi 10000000
// It prints: pixels, then the best ms of each loop (checked, plain, fused), then a checksum.
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

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  int reps = n > 1000000 ? 20 : 20000;
  uint16_t *red = malloc(n * 2), *nir = malloc(n * 2);
  float *out = malloc(n * 4);
  for (long i = 0; i < n; i++) {
    red[i] = 300 + (i * 7) % 3000;
    nir[i] = 2000 + (i * 13) % 4000;
  }
  double best = 1e30, plain = 1e30, fused = 1e30, sum = 0;
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
  }
  printf("%ld %.6f %.6f %.6f %f\n", n, best, plain, fused, sum);
  return 0;
}
