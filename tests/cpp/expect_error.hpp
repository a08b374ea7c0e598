// The C++ test programs' check of the native API's errors (expect.h holds the checks the C programs
// share): expect_error(__LINE__, fn, code, needle) expects fn() to throw tilegrad::Error with that
// status code and a message containing needle; a failure is counted in g_failures.
#ifndef TILEGRAD_TESTS_EXPECT_ERROR_HPP_
#define TILEGRAD_TESTS_EXPECT_ERROR_HPP_

#include <cstdint>
#include <cstdio>
#include <string>

#include "expect.h"
#include "tilegrad/tilegrad.hpp"

template <class Fn>
void expect_error(int line, Fn&& fn, int32_t code, const std::string& needle) {
  try {
    fn();
    std::fprintf(stderr, "line %d: FAIL: no tilegrad::Error thrown (want %d '%s')\n", line, code, needle.c_str());
    ++g_failures;
  } catch (const tilegrad::Error& e) {
    if (e.code() != code || std::string(e.what()).find(needle) == std::string::npos) {
      std::fprintf(stderr, "line %d: FAIL: got %d '%s', want %d '%s'\n", line, e.code(), e.what(), code,
                   needle.c_str());
      ++g_failures;
    }
  }
}

#endif  // TILEGRAD_TESTS_EXPECT_ERROR_HPP_
