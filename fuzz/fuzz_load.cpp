// libFuzzer target for the archive loader: any bytes must either load as a
// program or be refused with tdfx::ArchiveError — no crash, no other exception.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.h"
#include "export/archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    tdfx::ExportedProgram program = tdfx::load(in, "fuzz input");
    (void)program.print_readable();
  } catch (const tdfx::ArchiveError&) {
    // Refused cleanly: what the loader promises.
  }
  return 0;
}
