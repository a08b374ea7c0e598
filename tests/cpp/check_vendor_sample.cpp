// Runs the vendor's unchanged sample program (argv[1]) and checks what it prints:
//   "out result[i] is: v" for gradOutput = 1 and self = 1..6 (the sample's inputs),
// against gradInput = dy * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x)), computed here in double.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/wait.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_vendor_sample <sample program>\n");
    return 2;
  }
  FILE* p = popen(argv[1], "r");
  if (!p) {
    std::perror("popen");
    return 1;
  }
  const double self[6] = {1, 2, 3, 4, 5, 6};
  const double grad_output[6] = {1, 1, 1, 1, 1, 1};
  bool seen[6] = {};
  int failures = 0, lines = 0;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    std::fputs(line, stdout);
    long i = -1;
    double v = 0;
    if (std::sscanf(line, "out result[%ld] is: %lf", &i, &v) != 2) continue;
    ++lines;
    if (i < 0 || i >= 6 || seen[i]) {
      std::fprintf(stderr, "FAIL: unexpected or repeated index %ld\n", i);
      ++failures;
      continue;
    }
    seen[i] = true;
    const double x = self[i], s = 1.0 / (1.0 + std::exp(-x));
    const double expected = grad_output[i] * s * (1.0 + x * (1.0 - s));
    // The sample prints with %f (6 decimals): allow that rounding plus a few float32 ulps.
    if (!(std::fabs(v - expected) <= 5e-7 + 4e-7 * std::fabs(expected))) {
      std::fprintf(stderr, "FAIL: result[%ld] = %.6f, expected %.9f\n", i, v, expected);
      ++failures;
    }
  }
  const int status = pclose(p);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "FAIL: sample program did not exit with 0 (status %d)\n", status);
    ++failures;
  }
  if (lines != 6) {
    std::fprintf(stderr, "FAIL: expected 6 result lines, got %d\n", lines);
    ++failures;
  }
  if (failures) return 1;
  std::printf("vendor sample: 6 results match SiLU backward in double precision\n");
  return 0;
}
