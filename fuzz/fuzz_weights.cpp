// libFuzzer target for the weight records: the input decides each weight's
// dtype, shape and bytes, under seed 000's program, so the checks of weights
// against records and placeholders are what is fuzzed.
//
// Input layout, repeated per weight of the program: dtype index (1 byte),
// rank (1 byte), rank sizes (1 byte each), record length (2 bytes), bytes.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/fuzz_support.h"
#include "tdfx/core/dtype_names.h"

namespace {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::string bytes(size_t n) {
    n = std::min(n, size_ - at_);
    std::string out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string names[] = {"float32",   "float64",    "float16", "bfloat16", "int64",
                                      "int32",     "int16",      "int8",    "uint8",    "bool",
                                      "complex64", "complex128", "qint8"};
  nlohmann::json document = nlohmann::json::parse(tdfx::program_json(tdfx::fuzz::seed_program()));
  Input input(data, size);
  tdfx::detail::ZipWriter zip;
  std::vector<std::pair<std::string, std::string>> records;
  for (auto& weight : document["weights"]) {
    weight["dtype"] = names[input.byte() % std::size(names)];
    nlohmann::json shape = nlohmann::json::array();
    const int rank = input.byte() % 5;
    for (int i = 0; i < rank; ++i) shape.push_back(input.byte() % 17);
    weight["shape"] = shape;
    const size_t length = input.byte() | (size_t{input.byte()} << 8);
    records.emplace_back(weight["record"].get<std::string>(), input.bytes(length));
  }
  zip.add("program.json", document.dump());
  for (const auto& [name, bytes] : records) zip.add(name, bytes);
  tdfx::fuzz::load_print_run(zip.finish());
  return 0;
}
