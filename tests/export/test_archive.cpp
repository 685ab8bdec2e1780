// save/load: round trips, atomic writes, and corrupt files refused cleanly.
#include <caffe2/serialize/inline_container.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "export/archive.h"
#include "samples/pipelines.h"

using namespace tdfx;
namespace fs = std::filesystem;

namespace {

fs::path scratch_dir() {
  fs::path dir = fs::temp_directory_path() / ("tdfx_archive_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ExportedProgram seed_program() {
  return export_program(samples::seed_000_model(), {{"x", at::randn({1, 3})}});
}

}  // namespace

TEST_CASE("archive: a saved program loads back, prints and runs identically") {
  const fs::path path = scratch_dir() / "model.pt2";
  ExportedProgram program = seed_program();
  save(program, path.string());
  ExportedProgram loaded = load(path.string());
  loaded.graph().lint();
  CHECK(loaded.print_readable() == program.print_readable());
  CHECK(loaded.graph_signature().str() == program.graph_signature().str());
  CHECK(to_string(loaded.graph()) == to_string(program.graph()));
  const at::Tensor x = at::randn({1, 3});
  const auto a = program.module()({{"x", x}});
  const auto b = loaded.module()({{"x", x}});
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(at::equal(a[i], b[i]));
  fs::remove(path);
}

TEST_CASE("archive: saving replaces a file atomically and leaves no temporary behind") {
  const fs::path dir = scratch_dir() / "atomic";
  fs::create_directories(dir);
  const fs::path path = dir / "model.pt2";
  std::ofstream(path) << "old";
  save(seed_program(), path.string());
  CHECK(read_bytes(path) != "old");
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.is_regular_file();
  CHECK(files == 1);
  fs::remove_all(dir);
}

TEST_CASE("archive: saving into a missing folder fails with ArchiveError and writes nothing") {
  const fs::path path = scratch_dir() / "no_such_dir" / "model.pt2";
  CHECK_THROWS_WITH_AS(save(seed_program(), path.string()), doctest::Contains("model.pt2"),
                       ArchiveError);
  CHECK_FALSE(fs::exists(path.parent_path()));
}

TEST_CASE("archive: missing, empty and foreign files are refused with ArchiveError") {
  const fs::path dir = scratch_dir();
  CHECK_THROWS_WITH_AS(load((dir / "absent.pt2").string()), doctest::Contains("cannot open"),
                       ArchiveError);
  std::ofstream(dir / "empty.pt2").close();
  CHECK_THROWS_AS(load((dir / "empty.pt2").string()), ArchiveError);
  std::ofstream(dir / "text.pt2") << "this is not an archive\n";
  CHECK_THROWS_WITH_AS(load((dir / "text.pt2").string()), doctest::Contains("text.pt2"),
                       ArchiveError);
}

TEST_CASE("archive: every truncated or bit-flipped copy loads correctly or is refused cleanly") {
  const fs::path path = scratch_dir() / "model.pt2";
  save(seed_program(), path.string());
  const std::string bytes = read_bytes(path);
  size_t refused = 0, loaded = 0;
  auto attempt = [&](const std::string& data) {
    std::istringstream in(data);
    try {
      ExportedProgram program = load(in, "corrupt");
      program.module()({{"x", at::randn({1, 3})}});
      ++loaded;
    } catch (const ArchiveError&) {
      ++refused;
    } catch (const Error&) {
      ++refused;  // a well-formed archive whose program fails when run
    }
  };
  for (size_t length = 0; length < bytes.size(); length += std::max<size_t>(1, bytes.size() / 97)) {
    attempt(bytes.substr(0, length));
  }
  for (size_t position = 0; position < bytes.size();
       position += std::max<size_t>(1, bytes.size() / 211)) {
    std::string copy = bytes;
    copy[position] = static_cast<char>(copy[position] ^ 0x5a);
    attempt(copy);
  }
  CHECK(refused > 0);
  MESSAGE("corrupted copies: " << refused << " refused, " << loaded << " still valid");
  fs::remove(path);
}

TEST_CASE("archive: a well-formed archive with a broken program names the problem") {
  ExportedProgram program = seed_program();
  std::string document = program_json(program);
  const auto pos = document.find("aten::relu");
  REQUIRE(pos != std::string::npos);
  document.replace(pos, 10, "aten::nope");
  const fs::path path = scratch_dir() / "broken.pt2";
  {
    caffe2::serialize::PyTorchStreamWriter writer(path.string());
    writer.writeRecord("program.json", document.data(), document.size());
    writer.writeEndOfFile();
  }
  CHECK_THROWS_WITH_AS(load(path.string()), doctest::Contains("aten::nope"), ArchiveError);
  fs::remove(path);
}
