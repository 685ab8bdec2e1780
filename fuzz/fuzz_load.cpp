// libFuzzer target for the whole archive: any bytes must either load, print
// and run, or be refused with a tdfx::Error — no crash, no other exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tdfx::fuzz::load_print_run(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
