// TensorBoard event files: what EventFileWriter writes, read back apart from tdfx by
// tests/debug/read_events.py (its own CRC-32C and, through protoc and python3-protobuf, its
// own schema).

#include <ATen/ops/tensor.h>
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/debug/tensorboard.h"
#include "tests/support/test_support.h"

using namespace tdfx;
using tdfx::testing::ScratchDir;

namespace {

// What read_events.py prints of the event files in `dir`, with their names.
std::string read_events(const std::filesystem::path& file) {
  const auto result =
      tdfx::testing::run_command("/usr/bin/python3 " + tdfx::testing::source_dir() +
                                 "/tests/debug/read_events.py '" + file.string() + "' 2>&1");
  CHECK_MESSAGE(result.status == 0, result.out);
  return result.out;
}

}  // namespace

TEST_CASE("tensorboard: the masked CRC-32C of the check string") {
  // CRC-32C("123456789") is 0xe3069283; masked: rotated right by 15, plus 0xa282ead8.
  const uint32_t crc = 0xe3069283u;
  CHECK(masked_crc32c("123456789") == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  CHECK(masked_crc32c("") == 0xa282ead8u);  // the CRC of nothing is 0
}

TEST_CASE("tensorboard: scalars and histograms read back as TensorBoard reads them") {
  ScratchDir dir("tdfx_tensorboard");
  std::string path;
  {
    EventFileWriter log((dir / "runs" / "a").string());
    path = log.path();
    log.add_scalar("loss", 0.5, 1);
    log.add_scalar("train/lr", 0.25, 2);
    log.add_scalar("zero", 0, 2);  // written, though proto3 leaves a default out of a message
    // 1..8 in 4 buckets of width 1.75 from 1 to 8: (.., 2.75] (.., 4.5] (.., 6.25] (.., 8].
    log.add_histogram("actor/weight", at::arange(1, 9, at::kFloat), 3, 4);
    // Non-finite elements are left out; equal values make one bucket.
    const double inf = std::numeric_limits<double>::infinity();
    log.add_histogram("values", at::tensor({std::nan(""), inf, -inf, 5.0, 5.0}), 4);
    log.add_histogram("empty", at::tensor({std::nan("")}), 5);
    log.add_histogram("ints", at::tensor(std::vector<int64_t>{-2, 0, 2, 2}), 6, 2);
  }
  CHECK(std::filesystem::path(path).parent_path() == dir / "runs" / "a");
  CHECK(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  CHECK(read_events(path) ==
        "file_version 'brain.Event:2'; wall time set: True\n"
        "step 1: loss = 0.5\n"
        "step 2: train/lr = 0.25\n"
        "step 2: zero = 0.0\n"
        "step 3: actor/weight: histogram num 8 min 1 max 8 sum 36 sum_squares 204 limits "
        "[2.75, 4.5, 6.25, 8.0] counts [2, 2, 2, 2]\n"
        "step 4: values: histogram num 2 min 5 max 5 sum 10 sum_squares 50 limits [5.0] counts "
        "[2]\n"
        "step 5: empty: histogram num 0 min 0 max 0 sum 0 sum_squares 0 limits [] counts []\n"
        "step 6: ints: histogram num 4 min -2 max 2 sum 2 sum_squares 12 limits [0.0, 2.0] "
        "counts [2, 2]\n");
}

TEST_CASE("tensorboard: two writers of one folder write two files; a broken file is named") {
  ScratchDir dir("tdfx_tensorboard");
  EventFileWriter a(dir.path().string()), b(dir.path().string());
  CHECK(a.path() != b.path());
  // A file cut inside its last record is one the reader refuses, by where.
  a.add_scalar("x", 1, 0);
  std::filesystem::resize_file(a.path(), std::filesystem::file_size(a.path()) - 2);
  const auto cut =
      tdfx::testing::run_command("/usr/bin/python3 " + tdfx::testing::source_dir() +
                                 "/tests/debug/read_events.py '" + a.path() + "' 2>&1");
  CHECK(cut.status == 1);
  CHECK(cut.out.find("cut short") != std::string::npos);
}

TEST_CASE("tensorboard: what cannot be written or logged is an error naming it") {
  ScratchDir dir("tdfx_tensorboard");
  const std::string file = (dir / "a_file").string();
  std::ofstream(file) << "x";
  CHECK_THROWS_WITH_AS(EventFileWriter{file},
                       (file + ": cannot create the log folder: Not a directory").c_str(),
                       FileError);
  EventFileWriter log(dir.path().string());
  CHECK_THROWS_WITH_AS(log.add_histogram("w", at::tensor({1.0}), 0, 0),
                       "add_histogram('w'): 0 buckets; give 1 to 10000", Error);
  CHECK_THROWS_WITH_AS(
      log.add_histogram("z", at::tensor({1.0}).to(at::kComplexFloat), 0),
      "add_histogram('z'): a complex tensor has no histogram; log its real and imaginary parts "
      "apart",
      Error);
}
