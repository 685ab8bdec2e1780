// save/load: round trips, atomic writes, and hostile or damaged files refused cleanly.
#include <ATen/ATen.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/nn/modules/linear.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/torchscript.h"
#include "tdfx/export/zip.h"
#include "tests/export/enum_program.h"
#include "tests/support/test_support.h"

using namespace tdfx;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// The test binary's one scratch folder, removed when it exits.
const fs::path& scratch_dir() {
  static const tdfx::testing::ScratchDir dir("tdfx_archive");
  return dir.path();
}

ExportedProgram seed_program() {
  return export_program(samples::seed_000_model(), {{"x", at::randn({1, 3})}});
}

// True when `a` and `b` hold the same bytes in the same shape and dtype (NaN equals itself,
// -0.0 differs from 0.0).
bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         at::equal(a.contiguous().reshape({-1}).view(at::kByte),
                   b.contiguous().reshape({-1}).view(at::kByte));
}

size_t files_in(const fs::path& dir) {
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.is_regular_file();
  return files;
}

// The records of a saved program, for rewriting one of them.
struct Records {
  json document;
  std::vector<std::pair<std::string, std::string>> weights;
};

Records records_of(const ExportedProgram& program) {
  const std::string bytes = archive_bytes(program);
  const tdfx::detail::MemorySource source(bytes);
  const tdfx::detail::ZipReader zip(source, "test");
  Records out;
  for (const std::string& name : zip.names()) {
    const std::string data = zip.read(name, uint64_t{1} << 30, "");
    if (name == "program.json") {
      out.document = json::parse(data);
    } else {
      out.weights.emplace_back(name, data);
    }
  }
  return out;
}

std::string archive_of(const std::string& document,
                       const std::vector<std::pair<std::string, std::string>>& weights) {
  tdfx::detail::ZipWriter zip;
  zip.add("program.json", document);
  for (const auto& [name, data] : weights) zip.add(name, data);
  return zip.finish();
}

// The message load() gives for `program`'s archive (the seed program's by
// default) after `edit` rewrote its records; "" when it loads.
std::string refusal(const std::function<void(Records&)>& edit,
                    const ExportedProgram& program = seed_program(),
                    const LoadOptions& options = {}) {
  Records records = records_of(program);
  edit(records);
  try {
    load_bytes(archive_of(records.document.dump(), records.weights), "edited.pt2", options);
  } catch (const ArchiveError& e) {
    return e.what();
  }
  return "";
}

// The first node of the document whose target is `target`.
json& node_with_target(json& document, const std::string& target) {
  for (json& node : document["nodes"]) {
    if (node["target"] == target) return node;
  }
  throw std::runtime_error("no node with target " + target);
}

std::string nested_list(size_t depth) {
  std::string text;
  for (size_t i = 0; i < depth; ++i) text += "{\"list\": [";
  text += "{\"int\": 1}";
  for (size_t i = 0; i < depth; ++i) text += "]}";
  return text;
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
  // Saving is deterministic: the same program gives the same bytes.
  CHECK(archive_bytes(loaded) == tdfx::testing::read_text(path));
  fs::remove(path);
}

TEST_CASE(
    "archive: saving replaces a file atomically, leaves no temporary and respects the umask") {
  const fs::path dir = scratch_dir() / "atomic";
  fs::create_directories(dir);
  const fs::path path = dir / "model.pt2";
  std::ofstream(path) << "old";
  fs::remove(path);
  const mode_t old_mask = ::umask(027);
  save(seed_program(), path.string());
  ::umask(old_mask);
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0640);
  std::ofstream(dir / "other") << "old";
  save(seed_program(), (dir / "other").string());
  CHECK(tdfx::testing::read_text(dir / "other") != "old");
  CHECK(files_in(dir) == 2);
  fs::remove_all(dir);
}

TEST_CASE("archive: a file name of 255 bytes saves and loads") {
  const fs::path path = scratch_dir() / (std::string(251, 'm') + ".pt2");
  save(seed_program(), path.string());
  CHECK(load(path.string()).graph_signature().inputs.size() == 5);
  fs::remove(path);
}

TEST_CASE("archive: save refuses what load would refuse, and writes nothing") {
  auto program_reading = [](const std::string& key) {
    auto model = make_td_sequential({make_td_module(torch::nn::Linear(3, 2), {key}, {"out"})});
    return export_program(model, {{key, at::randn({1, 3})}});
  };
  const fs::path control = scratch_dir() / "control.pt2";
  CHECK_THROWS_WITH_AS(
      save(program_reading("nl\nb"), control.string()),
      (control.string() + ": cannot save: load would refuse the archive: input target 'nl\\nb' "
                          "holds a control character")
          .c_str(),
      ArchiveError);
  CHECK_FALSE(fs::exists(control));
  const fs::path bytes = scratch_dir() / "bytes.pt2";
  CHECK_THROWS_WITH_AS(save(program_reading("b\xff"), bytes.string()),
                       (bytes.string() + ": cannot save: modules[0].in_keys[0].key[0] 'b\\xff' is "
                                         "not UTF-8 text, which is all an archive keeps")
                           .c_str(),
                       ArchiveError);
  CHECK_FALSE(fs::exists(bytes));
  // The bytes alone are checked as save checks them.
  CHECK_THROWS_WITH_AS(archive_bytes(program_reading("nl\nb")),
                       "cannot archive the program: load would refuse the archive: input target "
                       "'nl\\nb' holds a control character",
                       ArchiveError);
}

TEST_CASE("archive: what export makes of common ops saves, loads and runs as exported") {
  // Ops users write that export keeps as they are or makes functional (uniform_ becomes
  // uniform): each is one a loaded program may run. Random ones draw the same numbers from the
  // same seed.
  const std::vector<std::pair<const char*, std::function<at::Tensor(const at::Tensor&)>>> cases = {
      {"scalar_tensor", [](const at::Tensor& x) { return x * at::scalar_tensor(2.0); }},
      {"index_put",
       [](const at::Tensor& x) {
         at::Tensor y = x.clone();
         y.index_put_({y < 0}, 0.0);
         return y;
       }},
      {"unfold", [](const at::Tensor& x) { return x.unfold(1, 2, 1).sum(-1); }},
      {"multinomial",
       [](const at::Tensor& x) {
         return at::multinomial(x.softmax(-1), 2, /*replacement=*/true).to(at::kFloat);
       }},
      {"randperm", [](const at::Tensor& x) { return x.index_select(1, at::randperm(4)); }},
      {"uniform",
       [](const at::Tensor& x) {
         return at::empty({5, 4}).uniform_(-1, 1) + x;
       }},
      {"exponential", [](const at::Tensor& x) { return at::empty_like(x).exponential_() * x; }}};
  for (const auto& [name, fn] : cases) {
    CAPTURE(name);
    auto model = make_td_sequential({make_td_module(fn, {"x"}, {"y"})});
    const at::Tensor x = at::randn({5, 4});
    const ExportedProgram program = export_program(model, {{"x", x}});
    const ExportedProgram loaded = load_bytes(archive_bytes(program));
    at::manual_seed(7);
    const at::Tensor a = program.module()({{"x", x}}).at(0);
    at::manual_seed(7);
    const at::Tensor b = loaded.module()({{"x", x}}).at(0);
    CHECK(at::equal(a, b));
    at::manual_seed(7);
    TensorDict eager({{"x", x}}, {5});
    model->forward(eager);
    CHECK(at::equal(eager.get("y"), a));
  }
}

TEST_CASE("archive: saving into a missing folder fails with FileError and writes nothing") {
  const fs::path path = scratch_dir() / "no_such_dir" / "model.pt2";
  CHECK_THROWS_WITH_AS(
      save(seed_program(), path.string()),
      (path.string() + ": cannot write the file: No such file or directory").c_str(), FileError);
  CHECK_FALSE(fs::exists(path.parent_path()));
}

TEST_CASE("archive: a save that hits the file-size limit fails cleanly and keeps the old file") {
  const fs::path dir = scratch_dir() / "fsize";
  fs::create_directories(dir);
  const fs::path path = dir / "model.pt2";
  std::ofstream(path) << "old";
  const ExportedProgram program = seed_program();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1000, 1000};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      save(program, path.string());
    } catch (const FileError& e) {
      const bool named = std::string(e.what()).find("File too large") != std::string::npos;
      ::_exit(named ? 0 : 3);
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(5);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(tdfx::testing::read_text(path) == "old");
  CHECK(files_in(dir) == 1);
  fs::remove_all(dir);
}

TEST_CASE("archive: missing, unreadable, non-regular and foreign files say what is wrong") {
  const fs::path dir = scratch_dir();
  // What cannot be opened as a file is a FileError; what a file holds, an ArchiveError.
  const std::string absent = (dir / "absent.pt2").string();
  CHECK_THROWS_WITH_AS(load(absent),
                       (absent + ": cannot open the file: No such file or directory").c_str(),
                       FileError);
  const std::string folder = (dir / "folder.pt2").string();
  fs::create_directories(folder);
  CHECK_THROWS_WITH_AS(load(folder), (folder + ": is a directory, not a regular file").c_str(),
                       FileError);
  const std::string fifo = (dir / "fifo.pt2").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(load(fifo), (fifo + ": is a FIFO, not a regular file").c_str(), FileError);
  const std::string empty = (dir / "empty.pt2").string();
  std::ofstream(empty).close();
  CHECK_THROWS_WITH_AS(
      load(empty), (empty + ": not a tdfx archive: 0 bytes is too small for a zip file").c_str(),
      ArchiveError);
  const std::string text = (dir / "text.pt2").string();
  std::ofstream(text) << "this is not an archive, just some words\n";
  CHECK_THROWS_WITH_AS(load(text),
                       (text + ": not a tdfx archive: no zip end-of-directory record").c_str(),
                       ArchiveError);
  fs::remove_all(folder);
  fs::remove(fifo);
}

namespace {

// Checks that `copy` is `original` exactly: the same graph, signature and weights, and outputs
// bit-identical on `inputs`.
void check_same_program(const ExportedProgram& copy, const ExportedProgram& original,
                        const std::vector<at::Tensor>& inputs) {
  CHECK(to_string(copy.graph()) == to_string(original.graph()));
  CHECK(copy.graph_signature().str() == original.graph_signature().str());
  CHECK(copy.print_readable() == original.print_readable());
  REQUIRE(copy.state().size() == original.state().size());
  for (const auto& [name, tensor] : original.state()) {
    CAPTURE(name);
    REQUIRE(copy.state().count(name) == 1);
    CHECK(bit_equal(copy.state().at(name), tensor));
  }
  const auto expected = original.module()(inputs);
  const auto got = copy.module()(inputs);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(bit_equal(got[i], expected[i]));
}

}  // namespace

TEST_CASE(
    "archive: a truncated or bit-flipped copy is refused with ArchiveError, or loads and runs "
    "bit-identically to the original") {
  // Every record is read CRC-checked against the central directory, and CRC-32 detects any
  // change of one byte: a flipped byte of program.json or of a weight is refused, never loaded
  // with a changed value. So the copies that load differ only in bytes the reader does not use
  // (it takes sizes, offsets and CRCs from the central directory), and each must be the
  // original program exactly. Weights whose value does change, their CRC made good, are the
  // next test's case. A crash here ends the binary, which fails the run.
  const ExportedProgram program = seed_program();
  const std::string bytes = archive_bytes(program);
  const std::vector<at::Tensor> inputs{at::randn({1, 3})};
  size_t refused = 0, loaded = 0;
  auto attempt = [&](const std::string& data) {
    std::optional<ExportedProgram> copy;
    try {
      copy.emplace(load_bytes(data, "corrupt"));
    } catch (const ArchiveError&) {
      ++refused;
      return;
    } catch (const Error& e) {
      FAIL_CHECK("refused with a tdfx::Error that is not an ArchiveError: " << e.what());
      return;
    } catch (const std::exception& e) {
      FAIL_CHECK("refused with an exception that is not a tdfx::Error: " << e.what());
      return;
    }
    ++loaded;
    check_same_program(*copy, program, inputs);
  };
  for (size_t length = 0; length < bytes.size(); length += std::max<size_t>(1, bytes.size() / 97)) {
    CAPTURE(length);
    attempt(bytes.substr(0, length));
  }
  for (size_t position = 0; position < bytes.size(); ++position) {
    CAPTURE(position);
    std::string copy = bytes;
    copy[position] = static_cast<char>(copy[position] ^ 0x5a);
    attempt(copy);
  }
  CHECK(refused > bytes.size() / 2);
  MESSAGE("corrupted copies: " << refused << " refused, " << loaded
                               << " identical to the original");
}

TEST_CASE(
    "archive: a weight changed with its CRC made good loads with the same graph and signature, "
    "and runs or refuses with a tdfx::Error") {
  // A changed weight byte with a matching CRC is a different, valid archive: its value may be
  // anything (NaN, inf), so the outputs are not compared; the program around it must be intact.
  const ExportedProgram program = seed_program();
  const std::vector<at::Tensor> inputs{at::randn({1, 3})};
  const Records original = records_of(program);
  REQUIRE_FALSE(original.weights.empty());
  size_t changed = 0, ran = 0;
  for (size_t record = 0; record < original.weights.size(); ++record) {
    const auto& [name, data] = original.weights[record];
    CAPTURE(name);
    for (size_t position = 0; position < data.size(); ++position) {
      CAPTURE(position);
      Records records = original;
      std::string& weight = records.weights[record].second;
      weight[position] = static_cast<char>(weight[position] ^ 0x5a);
      const ExportedProgram copy =
          load_bytes(archive_of(records.document.dump(), records.weights), "weight.pt2");
      CHECK(to_string(copy.graph()) == to_string(program.graph()));
      CHECK(copy.graph_signature().str() == program.graph_signature().str());
      CHECK(copy.print_readable() == program.print_readable());
      size_t differing = 0;
      for (const auto& [key, tensor] : program.state()) {
        REQUIRE(copy.state().count(key) == 1);
        differing += !bit_equal(copy.state().at(key), tensor);
      }
      CHECK(differing == 1);  // the edit reached one weight, and only one
      changed += differing;
      try {
        copy.module()(inputs);
        ++ran;
      } catch (const Error&) {
        // refused cleanly, naming what was wrong
      }
    }
  }
  MESSAGE(changed << " weights changed, " << ran << " runs succeeded");
}

TEST_CASE("archive: compressed, overlapping and oversized records are refused before reading") {
  const ExportedProgram program = seed_program();
  std::string bytes = archive_bytes(program);
  // The first local header's method field (offset 8) set to deflate.
  std::string compressed = bytes;
  const size_t directory = compressed.find(std::string("PK\1\2", 4));
  compressed[directory + 10] = 8;
  CHECK_THROWS_WITH_AS(load_bytes(compressed, "c.pt2"),
                       "c.pt2: not a tdfx archive: record 'program.json' is compressed; tdfx "
                       "archives store records uncompressed",
                       ArchiveError);
  LoadOptions small;
  small.max_program_bytes = 100;
  CHECK_THROWS_WITH_AS(load_bytes(bytes, "big.pt2", small),
                       doctest::Contains("big.pt2: record 'program.json' declares"), ArchiveError);
  CHECK_THROWS_WITH_AS(
      load_bytes(bytes, "big.pt2", small),
      doctest::Contains("over the limit of 100 bytes (LoadOptions::max_program_bytes)"),
      ArchiveError);
}

TEST_CASE("archive: reading program.json and the weights are each held to the memory budget") {
  const ExportedProgram program = seed_program();
  LoadOptions megabyte;
  megabyte.memory_budget = 1 << 20;
  CHECK(refusal([](Records&) {}, program, megabyte).empty());
  // A list of 100,000 ints (a 1 MB text): refused as it is read, before any check of what the
  // document says, at the value that passes the budget.
  CHECK(refusal(
            [](Records& r) {
              r.document["nodes"][0]["args"] = json(std::vector<json>(100000, {{"int", 1}}));
            },
            program, megabyte) ==
        "edited.pt2: reading program.json would go past the memory budget "
        "(LoadOptions::memory_budget, --memory-budget) of 1.05 MB (1,048,576 bytes): it holds "
        "more than that after 7678 of its JSON values");
  // A weight that says it is 4 MB, refused before its record is read.
  CHECK(refusal(
            [](Records& r) {
              json& weight = r.document["weights"][0];
              weight["shape"] = {1 << 20};
              node_with_target(r.document, weight["name"])["meta"]["shape"] = {1 << 20};
            },
            program, megabyte) ==
        "edited.pt2: weight 'p_module_0_module_weight': the weights need more than the "
        "memory budget of 1048576 bytes (LoadOptions::memory_budget)");
}

TEST_CASE("archive: deep nesting is refused before any recursive parser or printer sees it") {
  CHECK(refusal([](Records& r) {
          r.document["nodes"][5]["args"][0] = json::parse(nested_list(20));
        }).find("arguments nested too deeply") != std::string::npos);
  // 40,000 levels: the JSON text itself is refused, without parsing it.
  Records records = records_of(seed_program());
  std::string document = records.document.dump();
  const std::string marker = "\"version\":3";
  document.replace(document.find(marker), marker.size(),
                   "\"version\":" + std::string(40000, '[') + std::string(40000, ']'));
  CHECK_THROWS_WITH_AS(load_bytes(archive_of(document, records.weights), "deep.pt2"),
                       "deep.pt2: program.json nests deeper than 64 levels", ArchiveError);
  document = records.document.dump();
  document.replace(document.find(marker), marker.size(), "\"version\":[[[1]]]");
  CHECK_THROWS_WITH_AS(load_bytes(archive_of(document, records.weights), "v.pt2"),
                       doctest::Contains("archive format version a JSON array is not supported"),
                       ArchiveError);
}

TEST_CASE("archive: example inputs are saved (version 4) and loaded back, checked as weights are") {
  ExportedProgram program = seed_program();
  const std::string input = program.graph_signature().inputs.back().name;
  const at::Tensor x = at::randn({1, 3});
  program.set_example_inputs({{input, x}});
  const ExportedProgram copy = load_bytes(archive_bytes(program), "inputs.pt2");
  REQUIRE(copy.example_inputs().count(input) == 1);
  CHECK(bit_equal(copy.example_inputs().at(input), x));
  // Without them, the archive is version 3 as before.
  CHECK(records_of(seed_program()).document["version"] == 3);
  Records records = records_of(program);
  CHECK(records.document["version"] == 4);
  CHECK(refusal([&](Records& r) {
          r = records_of(program);
          r.document["version"] = 3;
        }) == "edited.pt2: an archive of version 3 has no example inputs");
  CHECK(refusal([&](Records& r) {
          r = records_of(program);
          r.document["inputs"][0]["shape"] = {1, 4};
        }) == "edited.pt2: input " + python_repr(input) +
                  ": its dtype or shape differs from its placeholder's");
  CHECK(refusal([&](Records& r) {
          r = records_of(program);
          r.document["inputs"][0]["name"] = r.document["weights"][0]["name"];
        }).find("not a user input of the signature, or given twice") != std::string::npos);
  CHECK_THROWS_WITH_AS(
      program.set_example_inputs({{input, at::randn({2, 4})}}),
      ("example input " + input + ": float32 [2, 4], where its placeholder is float32 [1, 3]")
          .c_str(),
      GraphError);
}

TEST_CASE("archive: an optimizer's state is saved (version 5) and loaded back, checked") {
  ExportedProgram program = seed_program();
  // SGD with momentum over every parameter, a momentum buffer for the first.
  OptimizerState state;
  state.type = "SGD";
  state.groups.push_back(
      {{{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0}, {"weight_decay", 0}, {"nesterov", 0}},
       {}});
  std::string first;
  at::Tensor buffer;
  for (const InputSpec& in : program.graph_signature().inputs) {
    if (in.kind != InputKind::kParameter) continue;
    state.groups[0].parameters.push_back(in.target);
    if (first.empty()) {
      first = in.target;
      buffer = at::randn(program.state().at(in.name).sizes());
    }
  }
  REQUIRE(!first.empty());
  state.parameters[first].tensors["momentum_buffer"] = buffer;
  program.set_optimizer_state(state);
  const ExportedProgram copy = load_bytes(archive_bytes(program), "optimizer.pt2");
  REQUIRE(copy.optimizer_state());
  CHECK(copy.optimizer_state()->type == "SGD");
  CHECK(copy.optimizer_state()->groups[0].options == state.groups[0].options);
  CHECK(copy.optimizer_state()->groups[0].parameters == state.groups[0].parameters);
  CHECK(bit_equal(copy.optimizer_state()->parameters.at(first).tensors.at("momentum_buffer"),
                  buffer));
  Records records = records_of(program);
  CHECK(records.document["version"] == 5);
  CHECK(refusal([&](Records& r) {
          r = records_of(program);
          r.document["version"] = 4;
        }) == "edited.pt2: an archive of version 4 has no optimizer state");
  CHECK(refusal([&](Records& r) {
          r = records_of(program);
          r.document["optimizer"]["groups"][0]["options"].erase("lr");
        }) ==
        "edited.pt2: optimizer state: group 0: SGD's options are lr, momentum, dampening, "
        "weight_decay, nesterov, each a finite number");
  CHECK(refusal([&](Records& r) {
          r = records_of(program);
          r.document["optimizer"]["state"][0]["tensors"][0]["shape"] = std::vector<int64_t>{1};
        }) == "edited.pt2: optimizer state: parameter " + python_repr(first) +
                  ": 'momentum_buffer': its dtype or shape differs from its placeholder's");
  CHECK(refusal([&](Records& r) {
          r = records_of(program);
          r.document["optimizer"]["groups"][0]["options"]["lr"] = -5;
        }) ==
        "edited.pt2: optimizer state: group 0: option lr is -5, not a finite number of at "
        "least 0");
  // What set_optimizer_state refuses, made in C++.
  OptimizerState wrong = state;
  wrong.parameters[first].tensors["momentum_buffer"] = at::randn({1});
  CHECK_THROWS_WITH_AS(program.set_optimizer_state(wrong),
                       ("optimizer state: " + first +
                        ": its momentum_buffer is not of its parameter's dtype and shape")
                           .c_str(),
                       GraphError);
  wrong = state;
  wrong.type = "LBFGS";
  CHECK_THROWS_WITH_AS(program.set_optimizer_state(wrong),
                       "optimizer state: type 'LBFGS' is not one tdfx keeps (Adam, AdamW, SGD, "
                       "RMSprop, Adagrad)",
                       GraphError);
}

TEST_CASE("archive: version 1 archives are refused with both versions named") {
  CHECK(refusal([](Records& r) { r.document["version"] = 1; }) ==
        "edited.pt2: archive format version 1 is not supported; this tdfx reads versions 2 to 5 "
        "(export the program again with this tdfx; version 1 archives pickled their weights)");
  CHECK(refusal([](Records& r) { r.document["version"] = 6; }) ==
        "edited.pt2: archive format version 6 is not supported; this tdfx reads versions 2 to 5 "
        "(export the program again with this tdfx; version 1 archives pickled their weights)");
}

TEST_CASE("archive: operators that are not pure tensor math are refused by name") {
  CHECK(refusal([](Records& r) {
          node_with_target(r.document, "aten::relu")["target"] = "aten::from_file";
        }).find("calls aten::from_file, which a loaded program may not run") != std::string::npos);
  CHECK(refusal([](Records& r) {
          node_with_target(r.document, "aten::relu")["target"] = "aten::nope";
        }).find("aten::nope") != std::string::npos);
  CHECK(refusal([](Records& r) {
          node_with_target(r.document, "aten::relu")["op"] = "call_method";
        }).find("op 'call_method' cannot appear in a loaded program") != std::string::npos);
  // zeros([2**40]) asks for 8 TiB.
  CHECK(refusal([](Records& r) {
          json& relu = node_with_target(r.document, "aten::relu");
          relu["target"] = "aten::zeros";
          relu["args"] = json::array({{{"list", json::array({{{"int", int64_t{1} << 40}}})}}});
        }).find("asks for 1099511627776 elements, over the memory budget") != std::string::npos);
}

TEST_CASE("archive: names that would reach printed code unsafely are refused") {
  CHECK(refusal([](Records& r) {
          json& x = node_with_target(r.document, "x");
          x["target"] = "x=__import__('os').system('echo pwned')";
        }).find("placeholder target") != std::string::npos);
  CHECK(refusal([](Records& r) {
          node_with_target(r.document, "aten::relu")["name"] = "relu\nimport os";
        }).find("is not a legal, unreserved identifier") != std::string::npos);
  CHECK(refusal([](Records& r) {
          node_with_target(r.document, "aten::relu")["meta"]["module_type"] = "Linear\nimport os";
        }).find("module type 'Linear\\nimport os' holds a control character") != std::string::npos);
  CHECK(refusal([](Records& r) {
          r.document["signature"]["inputs"][4]["target"] = "x\ninput forged";
        }).find("holds a control character") != std::string::npos);
  CHECK(refusal([](Records& r) {
          json& softplus = node_with_target(r.document, "aten::relu");
          softplus["kwargs"] = json::array({json::array({"a b", {{"int", 1}}})});
        }).find("keyword argument 'a b' is not an identifier or repeats") != std::string::npos);
}

TEST_CASE("archive: a program inconsistent with its signature or weights is refused") {
  CHECK(refusal([](Records& r) {
          r.document["signature"]["outputs"].erase(0);
        }).find("the signature lists 3 outputs but the graph returns 4") != std::string::npos);
  CHECK(refusal([](Records& r) {
          r.document["nodes"].back()["args"][0] = {{"tuple", json::array({{{"none", nullptr}}})}};
          r.document["signature"]["outputs"] = json::array({r.document["signature"]["outputs"][0]});
        }).find("output 0 of the signature is 'relu' but the graph returns a constant") !=
        std::string::npos);
  CHECK(refusal([](Records& r) {
          r.document["weights"][0]["shape"] = json::array({3, 4});
        }).find("its dtype or shape differs from its placeholder's") != std::string::npos);
  CHECK(refusal([](Records& r) {
          r.weights[0].second.pop_back();
        }).find("a float32 tensor of shape [4, 3] needs 48 bytes; record 'weights/0' holds 47") !=
        std::string::npos);
  CHECK(refusal([](Records& r) {
          r.document["weights"].erase(1);
        }).find("input p_module_0_module_bias has no weight") != std::string::npos);
  CHECK(refusal([](Records& r) {
          r.document["weights"][1]["record"] = "weights/0";
        }).find("is not a weight record of its own") != std::string::npos);
  CHECK(refusal([](Records& r) {
          r.document["weights"][0]["shape"] = json::array({-4, -3});
        }).find("a size is not a non-negative int: -4") != std::string::npos);
}

TEST_CASE("archive: batch dimensions must be dimensions of the node's shape, in order") {
  auto batch_dims = [](json value) {
    return refusal([&](Records& r) { r.document["nodes"][4]["meta"]["batch_dims"] = value; });
  };
  auto expected = [](const std::string& dim) {
    return "batch dimension " + dim + " is not a dimension of the shape in increasing order";
  };
  CHECK(batch_dims(json::array({0})) == "");
  CHECK(batch_dims(json::array({2})).find(expected("2")) != std::string::npos);
  CHECK(batch_dims(json::array({1, 0})).find(expected("0")) != std::string::npos);
  CHECK(batch_dims(json::array({-1})).find(expected("-1")) != std::string::npos);
  CHECK(batch_dims(json::array({"0"})).find(expected("'0'")) != std::string::npos);
  CHECK(batch_dims(json::array()).find("batch_dims must be a non-empty list") != std::string::npos);
  CHECK(batch_dims(json::array({0, 0, 0})).find("batch_dims must be a non-empty list") !=
        std::string::npos);
  CHECK(refusal([](Records& r) {
          json& meta = r.document["nodes"][4]["meta"];
          meta.erase("shape");
          meta["batch_dims"] = json::array({0});
        }).find("batch_dims must be a non-empty list of dimensions of the shape") !=
        std::string::npos);
}

TEST_CASE("archive: a loaded program refuses an input of another dtype or shape, naming it") {
  const std::string bytes = archive_bytes(seed_program());
  const ExportedProgram loaded = load_bytes(bytes, "m.pt2");
  // The traced shape but not the traced dtype: refused before anything runs.
  CHECK_THROWS_WITH_AS(loaded.module()({{"x", at::randn({1, 3}, at::kDouble)}}),
                       "input x is float64; the graph was traced with float32, and the dtypes it "
                       "computes in are constants of the graph: convert the input, or trace with "
                       "this dtype",
                       ShapeError);
  CHECK_THROWS_WITH_AS(loaded.module()({{"x", at::randn({1, 5})}}),
                       "input x has shape [1, 5]; the graph was traced with static shapes [1, 3]: "
                       "trace with TraceOptions::dynamic_batch (export_program: "
                       "ExportOptions::dynamic_batch) for a batch size that varies",
                       ShapeError);
}

TEST_CASE("archive: records the program does not name, and version 1 layouts, are refused") {
  Records records = records_of(seed_program());
  auto weights = records.weights;
  weights.emplace_back("weights.pkl", "cos\nsystem\n(S'echo pwned'\ntR.");
  CHECK_THROWS_WITH_AS(load_bytes(archive_of(records.document.dump(), weights), "stray.pt2"),
                       "stray.pt2: record 'weights.pkl' is not part of the program", ArchiveError);
  tdfx::detail::ZipWriter old;
  old.add("model/version", "1\n");
  old.add("model/program.json", records.document.dump());
  CHECK_THROWS_WITH_AS(load_bytes(old.finish(), "old.pt2"),
                       "old.pt2: this is a tdfx archive of format version 1 (pickled weights), "
                       "which is not supported; this tdfx reads versions 2 to 5: export the "
                       "program again with this tdfx",
                       ArchiveError);
  CHECK(refusal([](Records& r) {
          node_with_target(r.document, "aten::relu")["target"] = "aten::relu\nimport os";
        }) == "edited.pt2: node %relu: target 'aten::relu\\nimport os' holds a control character");
}

TEST_CASE("archive: memory formats and layouts are saved by name and load back identically") {
  const at::Tensor x = at::randn({2, 3, 4, 5});
  const ExportedProgram program = tdfx::testing::memory_formats_program(x);
  CHECK(program.code() ==
        "\n\n\n"
        "def forward(self, x):\n"
        "    clone = torch.ops.aten.clone.default(x, memory_format = torch.channels_last);  x = "
        "None\n"
        "    zeros_like = torch.ops.aten.zeros_like.default(clone, layout = torch.strided, "
        "memory_format = torch.contiguous_format)\n"
        "    add = torch.ops.aten.add.Tensor(clone, zeros_like);  clone = zeros_like = None\n"
        "    to = torch.ops.aten.to.dtype_layout(add, dtype = torch.float64, layout = "
        "torch.strided);  add = None\n"
        "    return (to,)\n"
        "    ");
  // Stored as kinds of their own, by the name Python's torch module has them under.
  const json document = records_of(program).document;
  std::string stored;
  for (const json& node : document["nodes"]) {
    if (node["op"] == "call_function") stored += node["args"].dump() + "\n";
  }
  CHECK(stored ==
        "[{\"node\":\"x\"},{\"memory_format\":\"channels_last\"}]\n"
        "[{\"node\":\"clone\"},{\"none\":null},{\"layout\":\"strided\"},{\"none\":null},"
        "{\"none\":null},{\"memory_format\":\"contiguous_format\"}]\n"
        "[{\"node\":\"clone\"},{\"node\":\"zeros_like\"},{\"int\":1}]\n"
        "[{\"node\":\"add\"},{\"dtype\":\"float64\"},{\"layout\":\"strided\"},"
        "{\"none\":null},{\"none\":null},{\"bool\":false},{\"bool\":false},{\"none\":null}]\n");

  const fs::path path = scratch_dir() / "formats.pt2";
  save(program, path.string());
  const ExportedProgram loaded = load(path.string());
  loaded.graph().lint();
  CHECK(to_string(loaded.graph()) == to_string(program.graph()));
  CHECK(loaded.print_readable() == program.print_readable());
  CHECK(archive_bytes(loaded) == tdfx::testing::read_text(path));
  const at::Tensor eager = tdfx::testing::memory_formats_forward(x);
  for (const ExportedProgram* p : {&program, &loaded}) {
    const auto out = p->module()({{"x", x}});
    REQUIRE(out.size() == 1);
    CHECK(out[0].dtype() == eager.dtype());
    CHECK(out[0].strides() == eager.strides());  // channels-last, as the clone made it
    CHECK(at::equal(out[0], eager));
  }
  fs::remove(path);
}

TEST_CASE("archive: an unknown memory format or layout, or a non-string one, is refused by node") {
  const ExportedProgram program = tdfx::testing::memory_formats_program(at::randn({2, 3, 4, 5}));
  auto with_argument = [&](const std::string& target, size_t index, json value) {
    return refusal([&](Records& r) { node_with_target(r.document, target)["args"][index] = value; },
                   program);
  };
  const std::string formats =
      " (one of 'contiguous_format', 'preserve_format', 'channels_last', 'channels_last_3d')";
  const std::string layouts =
      " (one of 'strided', 'sparse_coo', 'sparse_csr', '_mkldnn', 'sparse_csc', 'sparse_bsr', "
      "'sparse_bsc')";
  CHECK(with_argument("aten::clone", 1, {{"memory_format", "channels_first"}}) ==
        "edited.pt2: node %clone: invalid memory format 'channels_first'" + formats);
  CHECK(with_argument("aten::clone", 1, {{"memory_format", "torch.channels_last"}}) ==
        "edited.pt2: node %clone: invalid memory format 'torch.channels_last'" + formats);
  CHECK(with_argument("aten::clone", 1, {{"memory_format", 2}}) ==
        "edited.pt2: node %clone: invalid memory format 2" + formats);
  CHECK(with_argument("aten::zeros_like", 2, {{"layout", nullptr}}) ==
        "edited.pt2: node %zeros_like: invalid layout a JSON null" + layouts);
  CHECK(with_argument("aten::zeros_like", 2, {{"layout", json::array({"strided"})}}) ==
        "edited.pt2: node %zeros_like: invalid layout a JSON array" + layouts);
  CHECK(with_argument("aten::to.dtype_layout", 2, {{"layout", std::string(100, 'x')}}) ==
        "edited.pt2: node %to: invalid layout '" + std::string(40, 'x') + "...'" + layouts);
  // A known name of the wrong kind would reach the operator as a wrong int.
  CHECK(with_argument("aten::clone", 1, {{"layout", "strided"}}) ==
        "edited.pt2: %clone: argument 'memory_format' of aten::clone is torch.strided, where the "
        "schema takes MemoryFormat");
}

TEST_CASE("archive: Python runs the code printed for memory formats and layouts bit-identically") {
  // tests/export/check_printed_code.py: `tdfx show --code` and `--readable` compile and run
  // in Python like an independent interpreter of program.json, as does the TorchScript module.
  const fs::path dir = scratch_dir() / "printed_formats";
  fs::create_directories(dir);
  const ExportedProgram program = tdfx::testing::memory_formats_program(at::randn({2, 3, 4, 5}));
  save(program, (dir / "formats.pt2").string());
  save_torchscript(program, (dir / "formats.pt").string());
  const std::string command = "/usr/bin/python3 " + tdfx::testing::source_dir() +
                              "/tests/export/check_printed_code.py " + tdfx::testing::bin_dir() +
                              "/tdfx " + (dir / "scratch").string() + " " +
                              (dir / "formats.pt2").string() + " 2>&1";
  const auto result = tdfx::testing::run_command(command);
  CHECK(result.out ==
        "ok   formats.pt2: program.json and the weights interpret\n"
        "ok   formats.pt2: show --code compiles\n"
        "ok   formats.pt2: show --code runs bit-identically to program.json\n"
        "ok   formats.pt2: show --readable compiles\n"
        "ok   formats.pt2: show --readable runs bit-identically to program.json\n"
        "ok   formats.pt2: the TorchScript formats.pt beside it agrees bit for bit\n"
        "6 passed, 0 failed\n");
  CHECK(result.status == 0);
  fs::remove_all(dir);
}

TEST_CASE("archive: the modules a program came from survive a round trip") {
  const ExportedProgram program = seed_program();
  REQUIRE(program.modules().size() == 4);
  const ExportedProgram loaded = load_bytes(archive_bytes(program), "seed.pt2");
  REQUIRE(loaded.modules().size() == program.modules().size());
  for (size_t i = 0; i < program.modules().size(); ++i) {
    const ModuleBox& a = program.modules()[i];
    const ModuleBox& b = loaded.modules()[i];
    CAPTURE(a.path);
    CHECK(a.path == b.path);
    CHECK(a.type == b.type);
    CHECK(a.label == b.label);
    CHECK(a.sequential == b.sequential);
    CHECK(a.in_keys == b.in_keys);
    CHECK(a.out_keys == b.out_keys);
    CHECK(a.parameters == b.parameters);
    CHECK(a.buffers == b.buffers);
  }
  CHECK(program.modules()[0].path == "module.0");
  CHECK(program.modules()[0].type == "Linear");
  CHECK(program.modules()[0].parameters == 16);
}

TEST_CASE("archive: a version 2 archive, without modules, still loads") {
  Records records = records_of(seed_program());
  records.document["version"] = 2;
  records.document.erase("modules");
  const ExportedProgram loaded =
      load_bytes(archive_of(records.document.dump(), records.weights), "v2.pt2");
  CHECK(loaded.modules().empty());
  CHECK(loaded.graph().size() == seed_program().graph().size());
}

TEST_CASE("archive: a hostile modules table is refused, saying where") {
  CHECK(refusal([](Records& r) { r.document.erase("modules"); }) ==
        "edited.pt2: missing field 'modules'");
  CHECK(refusal([](Records& r) { r.document["modules"] = 7; }) ==
        "edited.pt2: 'modules' is not a list");
  CHECK(refusal([](Records& r) { r.document["modules"][0]["path"] = "a b"; }) ==
        "edited.pt2: module 0: path 'a b' is not a module path");
  CHECK(refusal([](Records& r) { r.document["modules"][1]["path"] = "module.0"; }) ==
        "edited.pt2: module 1: path 'module.0' is given twice");
  CHECK(refusal([](Records& r) { r.document["modules"][0]["label"] = "x\x1b[2J"; }) ==
        "edited.pt2: module 0: label 'x\\x1b[2J' holds a control character");
  CHECK(refusal([](Records& r) { r.document["modules"][0]["sequential"] = "no"; }) ==
        "edited.pt2: module 0: sequential is not a bool");
  CHECK(refusal([](Records& r) {
          r.document["modules"][0]["sequential"] = true;
          r.document["modules"][0]["path"] = "";
        }) == "edited.pt2: module 0: the root sequential is the program itself, not a module");
  CHECK(refusal([](Records& r) {
          r.document["modules"][0]["in_keys"][0]["key"] = json::array();
        }) == "edited.pt2: module 0: a key must be a non-empty list");
  CHECK(refusal([](Records& r) { r.document["modules"][0]["out_keys"] = "x"; }) ==
        "edited.pt2: module 0: field 'out_keys' is not a list");
  CHECK(refusal([](Records& r) { r.document["modules"][0]["parameters"] = -1; }) ==
        "edited.pt2: module 0: parameters is not a non-negative int: -1");
  CHECK(refusal([](Records& r) {
          r.document["modules"][0]["buffers"] = json::parse("18446744073709551615");
        }) ==
        "edited.pt2: program.json holds the integer 18446744073709551615, outside the "
        "64-bit signed range");
  CHECK(refusal([](Records& r) {
          r.document["modules"][0]["path"] = "module.9";
        }).find("comes from module 'module.0', which 'modules' does not list") !=
        std::string::npos);
}
