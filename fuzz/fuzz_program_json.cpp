// libFuzzer target for program.json: the input is the document, packed into
// a valid archive with seed 000's weight records, so every check after the
// zip layer is reached. A structure-aware mutator edits parsed documents the
// way an attacker would (operators from the allowlist, extreme integers,
// node references moved, arguments dropped or repeated, dtypes, memory
// formats and layouts of good and bad names put anywhere), falling back to
// byte mutations for text that does not parse.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "fuzz/fuzz_support.h"
#include "tdfx/export/op_policy.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using nlohmann::json;

const std::vector<std::pair<std::string, std::string>>& seed_weights() {
  static const auto weights = [] {
    const std::string bytes = tdfx::archive_bytes(tdfx::fuzz::seed_program());
    const tdfx::detail::MemorySource source(bytes);
    const tdfx::detail::ZipReader zip(source, "seed");
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string& name : zip.names()) {
      if (name != "program.json") out.emplace_back(name, zip.read(name, 1u << 30, ""));
    }
    return out;
  }();
  return weights;
}

// Every JSON value of `root` that `pick` accepts, by pointer.
void collect(json& value, std::vector<json*>& out, const std::function<bool(const json&)>& pick) {
  if (pick(value)) out.push_back(&value);
  if (value.is_structured()) {
    for (auto& item : value) collect(item, out, pick);
  }
}

bool mutate_document(json& document, std::mt19937& random) {
  if (!document.is_object() || !document.contains("nodes") || !document["nodes"].is_array() ||
      document["nodes"].empty()) {
    return false;
  }
  json& nodes = document["nodes"];
  json& node = nodes[random() % nodes.size()];
  static const std::vector<std::string_view> ops = tdfx::allowed_operators();
  static const int64_t extremes[] = {
      -1, 0, 1, 2, 7, 1 << 16, int64_t{1} << 31, int64_t{1} << 40, INT64_MAX, INT64_MIN};
  switch (random() % 8) {
    case 0:  // another operator
      node["target"] = "aten::" + std::string(ops[random() % ops.size()]);
      return true;
    case 1: {  // an extreme integer somewhere
      std::vector<json*> ints;
      collect(document, ints, [](const json& v) { return v.is_number_integer(); });
      if (ints.empty()) return false;
      *ints[random() % ints.size()] = extremes[random() % std::size(extremes)];
      return true;
    }
    case 2: {  // a node reference moved to another node
      std::vector<json*> refs;
      collect(document, refs, [](const json& v) { return v.is_object() && v.contains("node"); });
      if (refs.empty()) return false;
      (*refs[random() % refs.size()])["node"] = nodes[random() % nodes.size()]["name"];
      return true;
    }
    case 3:  // an argument dropped
      if (node.contains("args") && node["args"].is_array() && !node["args"].empty()) {
        node["args"].erase(random() % node["args"].size());
        return true;
      }
      return false;
    case 4:  // an argument repeated
      if (node.contains("args") && node["args"].is_array() && !node["args"].empty()) {
        node["args"].push_back(node["args"][random() % node["args"].size()]);
        return true;
      }
      return false;
    case 5: {  // a node duplicated under a new name
      json copy = node;
      copy["name"] = "fuzz_" + std::to_string(random() % 100);
      nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(random() % nodes.size()), copy);
      return true;
    }
    case 6: {  // an argument made a dtype, memory format or layout, named well or not
      static const char* const kinds[] = {"dtype", "memory_format", "layout"};
      static const json names[] = {"float32",
                                   "bool",
                                   "channels_last",
                                   "preserve_format",
                                   "strided",
                                   "sparse_coo",
                                   "_mkldnn",
                                   "torch.strided",
                                   "float128",
                                   "",
                                   2,
                                   nullptr};
      std::vector<json*> args;
      collect(document, args, [](const json& v) { return v.is_object() && v.size() == 1; });
      if (args.empty()) return false;
      *args[random() % args.size()] = {
          {kinds[random() % std::size(kinds)], names[random() % std::size(names)]}};
      return true;
    }
    default: {  // a shape changed
      std::vector<json*> shapes;
      collect(document, shapes, [](const json& v) { return v.is_object() && v.contains("shape"); });
      if (shapes.empty()) return false;
      json& owner = *shapes[random() % shapes.size()];
      owner["shape"] = json::array({extremes[random() % std::size(extremes)], 3});
      return true;
    }
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::mt19937 random(seed);
  if (random() % 4 != 0) {
    json document = json::parse(std::string(reinterpret_cast<char*>(data), size), nullptr, false);
    if (!document.is_discarded() && mutate_document(document, random)) {
      const std::string text = document.dump();
      if (text.size() <= max_size) {
        std::memcpy(data, text.data(), text.size());
        return text.size();
      }
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tdfx::detail::ZipWriter zip;
  zip.add("program.json", std::string_view(reinterpret_cast<const char*>(data), size));
  for (const auto& [name, bytes] : seed_weights()) zip.add(name, bytes);
  tdfx::fuzz::load_print_run(zip.finish());
  return 0;
}
