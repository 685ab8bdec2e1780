#pragma once
// Running an ONNX model in ONNX Runtime (onnxruntime-node, driven by tests/onnx/run_onnx.js
// through Node.js), for test_onnx and bench_onnx: the inputs go to files, Node runs the model
// (and, when asked, times it), and the outputs come back as tensors.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/test_support.h"

namespace tdfx::testing {

/// Tensors by name: a model's inputs, or its outputs in the model's order.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Where onnxruntime-node is: $TDFX_ORT_DIR, else scripts/bootstrap.sh --test's folder.
inline std::string ort_dir() {
  const char* dir = std::getenv("TDFX_ORT_DIR");
  return dir ? dir : source_dir() + "/.deps/onnxruntime/node_modules/onnxruntime-node";
}

inline std::string ort_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat:
      return "float32";
    case c10::kDouble:
      return "float64";
    case c10::kLong:
      return "int64";
    case c10::kInt:
      return "int32";
    case c10::kBool:
      return "bool";
    default:
      throw std::runtime_error("no ONNX Runtime dtype for " + std::string(c10::toString(t)));
  }
}

inline c10::ScalarType from_ort_dtype(const std::string& t) {
  if (t == "float32") return c10::kFloat;
  if (t == "float64") return c10::kDouble;
  if (t == "int64") return c10::kLong;
  if (t == "int32") return c10::kInt;
  if (t == "bool") return c10::kBool;
  throw std::runtime_error("unknown ONNX Runtime dtype " + t);
}

/// How to run: `timed_runs` > 0 times that many `session.run` calls after one warm-up run, in a
/// session of `threads` intra-op threads (0: ONNX Runtime's default).
struct OrtRunOptions {
  int timed_runs = 0;
  int threads = 0;
};

/// What ONNX Runtime gave: the outputs of the (first) run, and with timed runs the mean wall
/// time of one, in nanoseconds.
struct OrtResult {
  NamedTensors outputs;
  double ns_per_run = 0;
};

/// Runs `model` in ONNX Runtime on `inputs` (by graph input name). Throws std::runtime_error
/// when onnxruntime-node is missing or the model does not load or run.
inline OrtResult run_in_ort(const std::string& model, const NamedTensors& inputs,
                            const OrtRunOptions& options = {}) {
  if (!std::filesystem::exists(ort_dir())) {
    throw std::runtime_error("onnxruntime-node is not at " + ort_dir() +
                             "; run scripts/bootstrap.sh --test");
  }
  ScratchDir dir("tdfx_ort");
  nlohmann::json request;
  request["outputs_dir"] = dir.path().string();
  request["timed_runs"] = options.timed_runs;
  request["threads"] = options.threads;
  request["inputs"] = nlohmann::json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor t = inputs[i].second.contiguous();
    const std::string file = (dir / ("in" + std::to_string(i) + ".bin")).string();
    std::ofstream(file, std::ios::binary)
        .write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    request["inputs"].push_back({{"name", inputs[i].first},
                                 {"dtype", ort_dtype(t.scalar_type())},
                                 {"dims", t.sizes().vec()},
                                 {"file", file}});
  }
  const std::string request_path = (dir / "request.json").string();
  std::ofstream(request_path) << request.dump();
  const auto ran = run_command("node '" + source_dir() + "/tests/onnx/run_onnx.js' '" + ort_dir() +
                               "' '" + model + "' '" + request_path + "' 2>&1");
  if (ran.status != 0) throw std::runtime_error("ONNX Runtime failed: " + ran.out);
  const auto reply = nlohmann::json::parse(read_text((dir / "outputs.json").string()));
  OrtResult result;
  result.ns_per_run = reply.value("ns_per_run", 0.0);
  for (const auto& o : reply["outputs"]) {
    const std::string bytes = read_text(o["file"].get<std::string>());
    const auto dims = o["dims"].get<std::vector<int64_t>>();
    at::Tensor t = at::empty(dims, at::TensorOptions().dtype(from_ort_dtype(o["dtype"])));
    if (bytes.size() != t.nbytes()) {
      throw std::runtime_error("ONNX Runtime output " + o["name"].get<std::string>() + " has " +
                               std::to_string(bytes.size()) + " bytes, expected " +
                               std::to_string(t.nbytes()));
    }
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    result.outputs.emplace_back(o["name"].get<std::string>(), t);
  }
  return result;
}

}  // namespace tdfx::testing
