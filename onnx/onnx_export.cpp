// The public ONNX export (onnx_export.h): the model around the graph the converter writes,
// checked and serialized, and the table of operators the rules cover.

#include "tdfx/onnx/onnx_export.h"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "tdfx/core/file_io.h"
#include "tdfx/onnx/converter.h"
#include "tdfx/onnx/rules/rules.h"

namespace tdfx {

std::string onnx_model(const ExportedProgram& program, const OnnxOptions& options) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("tdfx");
  model.set_producer_version(TDFX_VERSION_STRING);
  if (!options.doc_string.empty()) model.set_doc_string(options.doc_string);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name(options.graph_name);
  onnx_detail::Converter(
      program, graph, options.memory_budget > 0 ? options.memory_budget : program.memory_budget())
      .convert();
  try {
    onnx::checker::check_model(model);
    onnx::ShapeInferenceOptions strict(/*check_type=*/true, /*error_mode=*/1);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), strict);
  } catch (const std::exception& e) {
    // ONNX lists one failure a line; a message of tdfx's is one line.
    std::string failures = e.what();
    while (!failures.empty() && failures.back() == '\n') failures.pop_back();
    for (size_t at = failures.find('\n'); at != std::string::npos; at = failures.find('\n', at)) {
      failures.replace(at, 1, "; ");
    }
    throw OnnxError(
        fmt::format("the ONNX model written from the program fails ONNX's checks: {}", failures));
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw OnnxError("the ONNX model could not be serialized");
  return bytes;
}

void save_onnx(const ExportedProgram& program, const std::string& path,
               const OnnxOptions& options) {
  write_file_atomically(path, onnx_model(program, options));
}

std::vector<OnnxOperator> onnx_operators() {
  std::vector<OnnxOperator> out;
  for (const auto& [name, entry] : onnx_detail::rules()) out.push_back({name, entry.onnx});
  return out;
}

}  // namespace tdfx
