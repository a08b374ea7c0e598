/* Minimal checks shared by the C and C++ test programs: EXPECT(cond) and EXPECT_ERR(call, code,
 * text) (status == code and aclGetRecentErrMsg() contains text). Failures are counted in
 * g_failures; main returns non-zero when any failed (see EXPECT_REPORT). */
#ifndef TILEGRAD_TESTS_EXPECT_H_
#define TILEGRAD_TESTS_EXPECT_H_

#include <stdio.h>
#include <string.h>

#include "acl/acl_base.h"

static int g_failures = 0;

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond);         \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)

#define EXPECT_ERR(expr, code, needle)                                                          \
  do {                                                                                          \
    int status_ = (int)(expr);                                                                  \
    const char* msg_ = aclGetRecentErrMsg();                                                    \
    if (status_ != (code) || !msg_ || !strstr(msg_, (needle))) {                                \
      fprintf(stderr, "%s:%d: FAIL: %s -> %d (want %d), message '%s' (want '%s')\n", __FILE__, \
              __LINE__, #expr, status_, (int)(code), msg_ ? msg_ : "(null)", (needle));         \
      ++g_failures;                                                                             \
    }                                                                                           \
  } while (0)

/* Prints the outcome; the value to return from main. */
static int expect_report(const char* program) {
  if (g_failures) {
    fprintf(stderr, "%s: %d failure(s)\n", program, g_failures);
    return 1;
  }
  printf("%s: all checks passed\n", program);
  return 0;
}

#endif /* TILEGRAD_TESTS_EXPECT_H_ */
