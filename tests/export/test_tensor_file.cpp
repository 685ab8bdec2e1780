// Tensor files (torch.save's format): Python's torch as the oracle both ways, and a
// generated corpus of hostile files refused with ArchiveError by message.
#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/export/tensor_file.h"
#include "tests/support/test_support.h"

using namespace tdfx;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Runs a script of tests/export/ with Debian's python3-torch; its output when it fails.
tdfx::testing::CommandResult python(const std::string& script, const std::string& args) {
  return tdfx::testing::run_command("/usr/bin/python3 " + tdfx::testing::source_dir() +
                                    "/tests/export/" + script + " " + args + " 2>&1");
}

std::string hex_of(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.detach().contiguous();
  const auto* bytes = static_cast<const unsigned char*>(flat.data_ptr());
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < flat.nbytes(); ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

json describe(const at::Tensor& tensor) {
  return {{"dtype", dtype_name(tensor.scalar_type())},
          {"shape", tensor.sizes().vec()},
          {"requires_grad", tensor.requires_grad()},
          {"hex", hex_of(tensor)}};
}

}  // namespace

TEST_CASE("tensor file: what torch.save writes loads bit for bit, views and sharing kept") {
  const tdfx::testing::ScratchDir scratch("tdfx_tensor_file_oracle");
  const fs::path& dir = scratch.path();
  const auto written = python("tensor_file_oracle.py", "write " + dir.string());
  REQUIRE_MESSAGE(written.status == 0,
                  "Python's torch (Debian python3-torch) is required: " << written.out);
  const json manifest = json::parse(tdfx::testing::read_text((dir / "manifest.json").string()));
  REQUIRE(manifest.size() >= 20);
  for (const auto& [name, expected] : manifest.items()) {
    CAPTURE(name);
    const TensorFile file = load_tensor_file((dir / (name + ".pt")).string());
    CHECK(file.is_dict == expected["is_dict"].get<bool>());
    REQUIRE(file.entries.size() == expected["entries"].size());
    // Tensors sharing a storage in Python share one here, and only they do.
    std::map<int64_t, const void*> storage_of_group;
    std::map<const void*, int64_t> group_of_storage;
    for (size_t i = 0; i < file.entries.size(); ++i) {
      const auto& [key, tensor] = file.entries[i];
      const json& want = expected["entries"][i];
      CAPTURE(key);
      CHECK(key == want["name"].get<std::string>());
      CHECK(dtype_name(tensor.scalar_type()) == want["dtype"].get<std::string>());
      CHECK(tensor.sizes().vec() == want["shape"].get<std::vector<int64_t>>());
      CHECK(tensor.strides().vec() == want["stride"].get<std::vector<int64_t>>());
      CHECK(tensor.storage_offset() == want["offset"].get<int64_t>());
      CHECK(tensor.requires_grad() == want["requires_grad"].get<bool>());
      CHECK(hex_of(tensor) == want["hex"].get<std::string>());
      const void* data = tensor.storage().data();
      const int64_t group = want["storage"].get<int64_t>();
      if (tensor.storage().nbytes() == 0) continue;  // no data pointer to compare
      CHECK(storage_of_group.emplace(group, data).first->second == data);
      CHECK(group_of_storage.emplace(data, group).first->second == group);
    }
  }
}

TEST_CASE("tensor file: Python's torch.load reads what save_tensor_file writes, bit for bit") {
  const tdfx::testing::ScratchDir scratch("tdfx_tensor_file_round_trip");
  const fs::path& dir = scratch.path();
  const auto written = python("tensor_file_oracle.py", "write " + dir.string());
  REQUIRE_MESSAGE(written.status == 0, written.out);
  const json manifest = json::parse(tdfx::testing::read_text((dir / "manifest.json").string()));
  for (const auto& [name, expected] : manifest.items()) {
    const TensorFile file = load_tensor_file((dir / (name + ".pt")).string());
    const std::string copy = (dir / (name + ".copy.pt")).string();
    if (file.is_dict) {
      save_tensor_file(file.entries, copy);
    } else {
      save_tensor_file(file.entries.at(0).second, copy);
    }
  }
  // Tensors made in C++, described by C++: Python must see the same bytes.
  const TensorEntries made{
      {"f32", at::arange(6, at::kFloat).reshape({2, 3}).t()},
      {"i64", at::tensor({-(int64_t{1} << 40), int64_t{7}}, at::kLong)},
      {"bool", at::tensor({1, 0, 1}).to(at::kBool)},
      {"bf16", at::linspace(-2, 2, 5).to(at::kBFloat16)},
      {"f16", at::tensor({1.5, -0.0}).to(at::kHalf)},
      {"f64_0dim", at::scalar_tensor(2.25, at::kDouble)},
      {"empty", at::zeros({0, 4})},
      {"grad", at::ones({2}).set_requires_grad(true)},
  };
  save_tensor_file(made, (dir / "cpp.pt").string());
  json described = {{"is_dict", true}, {"entries", json::array()}};
  for (const auto& [key, tensor] : made) {
    // Written as a value: "grad" loads without requires_grad.
    json entry = describe(tensor.detach());
    entry["name"] = key;
    described["entries"].push_back(entry);
  }
  std::ofstream(dir / "cpp.json") << described.dump();
  const auto checked = python("tensor_file_oracle.py", "check " + dir.string());
  INFO(checked.out);
  CHECK(checked.status == 0);
  CHECK(checked.out.find("all ok") != std::string::npos);
}

TEST_CASE(
    "tensor file: saved files load back identically, and saving refuses what it cannot store") {
  const tdfx::testing::ScratchDir scratch("tdfx_tensor_file_save");
  const fs::path& dir = scratch.path();
  const at::Tensor t = at::arange(12, at::kInt).reshape({3, 4}).slice(1, 1, 3);
  save_tensor_file(t, (dir / "one.pt").string());
  const TensorFile one = load_tensor_file((dir / "one.pt").string());
  CHECK_FALSE(one.is_dict);
  REQUIRE(one.entries.size() == 1);
  CHECK(one.entries[0].first.empty());
  CHECK(at::equal(one.entries[0].second, t));
  CHECK(one.entries[0].second.is_contiguous());
  // Deterministic bytes.
  CHECK(tensor_file_bytes({false, {{"", t}}}) == tensor_file_bytes({false, {{"", t.clone()}}}));
  // The same bytes read from memory: the tensor back, and garbage refused by the name given.
  const TensorFile from_memory = load_tensor_file_bytes(tensor_file_bytes({false, {{"", t}}}));
  REQUIRE(from_memory.entries.size() == 1);
  CHECK(at::equal(from_memory.entries[0].second, t));
  CHECK_THROWS_WITH_AS(load_tensor_file_bytes("not a zip", "upload"), doctest::Contains("upload"),
                       ArchiveError);

  const TensorEntries twice{{"x", t}, {"x", t}};
  CHECK_THROWS_WITH_AS(save_tensor_file(twice, (dir / "twice.pt").string()),
                       doctest::Contains("tensor 'x' is given twice"), ArchiveError);
  CHECK_THROWS_WITH_AS(save_tensor_file(at::quantize_per_tensor(at::ones({2}), 0.1, 0, at::kQInt8),
                                        (dir / "q.pt").string()),
                       doctest::Contains("which tensor files do not store"), ArchiveError);
  CHECK_THROWS_WITH_AS(save_tensor_file(at::Tensor(), (dir / "u.pt").string()),
                       doctest::Contains("the tensor is undefined"), ArchiveError);
  const std::string missing = (dir / "missing" / "x.pt").string();
  CHECK_THROWS_WITH_AS(save_tensor_file(t, missing),
                       (missing + ": cannot write the file: No such file or directory").c_str(),
                       FileError);
  CHECK_FALSE(fs::exists(dir / "twice.pt"));
}

TEST_CASE("tensor file: every hostile file is refused with an error naming its problem") {
  const tdfx::testing::ScratchDir scratch("tdfx_tensor_file_hostile");
  const fs::path& dir = scratch.path();
  const auto written = python("hostile_tensor_files.py", dir.string());
  REQUIRE_MESSAGE(written.status == 0, written.out);
  const json manifest = json::parse(tdfx::testing::read_text((dir / "manifest.json").string()));
  REQUIRE(manifest.size() > 80);
  size_t refused = 0;
  for (const json& entry : manifest) {
    const std::string name = entry["name"];
    const std::string file = entry["file"];
    CAPTURE(name);
    if (entry["expect"].is_null()) {
      CHECK_NOTHROW(load_tensor_file(file));
      continue;
    }
    const std::string expect = entry["expect"];
    std::string message, kind;
    try {
      load_tensor_file(file);
    } catch (const FileError& e) {
      message = e.what();
      kind = "FileError";
    } catch (const ArchiveError& e) {
      message = e.what();
      kind = "ArchiveError";
    }
    CAPTURE(message);
    // What is no regular file (a folder, a FIFO) is a FileError; what a file holds, an
    // ArchiveError.
    const bool regular = fs::symlink_status(file).type() == fs::file_type::regular;
    CHECK(kind == (regular ? "ArchiveError" : "FileError"));
    // The path names the case: the phrase is looked for in the problem after it.
    REQUIRE(message.rfind(file + ": ", 0) == 0);
    const std::string problem = message.substr(file.size() + 2);
    CHECK(problem.find(expect) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    refused += problem.find(expect) != std::string::npos;
  }
  MESSAGE(refused << " hostile tensor files refused for their reason");
}
