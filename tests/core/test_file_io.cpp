// write_file_atomically replaces a regular file, and nothing else.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tdfx/core/error.h"
#include "tdfx/core/file_io.h"
#include "tests/support/test_support.h"

namespace fs = std::filesystem;

TEST_CASE("file io: a symbolic link, FIFO or directory is refused, never replaced") {
  const fs::path dir = fs::temp_directory_path() / ("tdfx_file_io_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path target = dir / "target.txt";
  { std::ofstream(target) << "kept"; }
  const fs::path link = dir / "link.txt";
  fs::create_symlink(target, link);
  CHECK_THROWS_WITH_AS(
      tdfx::write_file_atomically(link.string(), "new"),
      (link.string() + ": cannot write the file: it is a symbolic link, not a regular file")
          .c_str(),
      tdfx::FileError);
  CHECK(fs::is_symlink(link));
  CHECK(tdfx::testing::read_text(target) == "kept");

  const fs::path fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(
      tdfx::write_file_atomically(fifo.string(), "new"),
      (fifo.string() + ": cannot write the file: it is a FIFO, not a regular file").c_str(),
      tdfx::FileError);
  CHECK(fs::is_fifo(fifo));
  CHECK_THROWS_WITH_AS(
      tdfx::write_file_atomically(dir.string(), "new"),
      (dir.string() + ": cannot write the file: it is a directory, not a regular file").c_str(),
      tdfx::FileError);

  tdfx::write_file_atomically(target.string(), "replaced");
  CHECK(tdfx::testing::read_text(target) == "replaced");
  // Nothing else is left in the folder: no temporary.
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir)) entries += entry.exists() ? 1 : 0;
  CHECK(entries == 3);
  fs::remove_all(dir);
}
