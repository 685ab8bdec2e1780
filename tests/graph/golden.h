#pragma once
// Reads the reference texts in tests/golden/.

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tdfx::testing {

inline std::string source_dir() {
  const char* dir = std::getenv("TDFX_SOURCE_DIR");
  return dir ? dir : TDFX_SOURCE_DIR_DEFAULT;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string golden(const std::string& name) {
  return read_text(source_dir() + "/tests/golden/" + name);
}

}  // namespace tdfx::testing
