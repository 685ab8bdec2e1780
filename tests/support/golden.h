#pragma once
// Golden files written by real runs: compared whole, or rewritten with TDFX_UPDATE_GOLDEN=1.

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/support/test_support.h"

namespace tdfx::testing {

/// True when the golden files are to be written rather than compared (TDFX_UPDATE_GOLDEN=1).
inline bool updating_golden() {
  const char* value = std::getenv("TDFX_UPDATE_GOLDEN");
  return value && std::string(value) == "1";
}

/// Compares `actual` whole with the file `dir/file` of the repository (`tests/tracer/golden`),
/// or writes it there when updating. A missing file fails the test.
inline void check_golden(const std::string& dir, const std::string& file,
                         const std::string& actual) {
  const std::string path = source_dir() + "/" + dir + "/" + file;
  if (updating_golden()) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << actual;
    out.close();
    REQUIRE_MESSAGE(out.good(), "cannot write " << path);
    MESSAGE("TDFX_UPDATE_GOLDEN=1: wrote " << path);
    return;
  }
  std::ifstream probe(path);
  REQUIRE_MESSAGE(probe.good(), path << " is missing; run the test with TDFX_UPDATE_GOLDEN=1 "
                                        "to write it from a real run");
  CHECK(actual == read_text(path));
}

}  // namespace tdfx::testing
