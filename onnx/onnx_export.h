#pragma once

/// \file
/// ONNX export: an ExportedProgram written as an ONNX model (opset 17, ONNX IR 8) that ONNX
/// Runtime, TensorRT or OpenVINO can load, with no Python involved.
///
/// What the model holds:
/// - the program's parameters and buffers as initializers, named by their placeholders
///   (`p_module_0_module_weight`);
/// - one graph input per user input and one graph output per output key, named by the joined
///   key as ExportedModule calls them (`agents_observation`, `loc`; a key that is no
///   identifier keeps its spelling). An output key that is also an input key (a module that
///   reads "hidden" and writes it) is named `<key>_out`, since ONNX names a value once;
/// - a dimension that follows the batch (`s0` in the printed program) as the symbolic
///   dimension `s0`, every other dimension as its traced size;
/// - one or more ONNX nodes per aten call of the program (a getitem picks an output and needs
///   none): the first carries the call's name (`linear_1`, and `linear_1/MatMul`,
///   `linear_1/Add` when it takes several), the value it computes keeps that name (as does
///   the item a getitem picks), and each node's doc string is its module path and type
///   (`module.2.module (Linear(in_features=4, out_features=4, bias=true))`).
///
/// An operator with no ONNX form (onnx_operators() lists those that have one) is refused with
/// an OnnxError naming the node and the operator, before anything is written. The model is
/// checked by ONNX's checker and shape inference before it is returned or written.

#include <string>
#include <string_view>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/export/program.h"

namespace tdfx {

/// A program that cannot be written as ONNX: the message names the node and the operator.
class OnnxError : public Error {
 public:
  using Error::Error;
};

/// Options of onnx_model and save_onnx.
struct OnnxOptions {
  /// The graph's name in the model.
  std::string graph_name = "tdfx_program";
  /// The model's doc string.
  std::string doc_string;
  /// The most bytes the tensors the converter makes itself may take together (the ones of a
  /// LayerNorm without weight, the filled weight and bias of a BatchNorm or InstanceNorm without
  /// them), sized from the program's constants and traced shapes: a node that would pass it is
  /// refused by name, before the tensor is made. 0: the program's memory budget
  /// (ExportedProgram::memory_budget, a loaded program's), none for a program exported here.
  uint64_t memory_budget = 0;
};

/// The ONNX opset the models are written at.
inline constexpr int64_t kOnnxOpset = 17;

/// `program` as a serialized ONNX ModelProto, checked (onnx::checker::check_model with full
/// shape inference). OnnxError for an operator or dtype ONNX cannot express, or a model the
/// checker refuses.
std::string onnx_model(const ExportedProgram& program, const OnnxOptions& options = {});

/// Writes onnx_model(program) to `path` atomically (write_file_atomically): the file is
/// either the whole checked model or left as it was. OnnxError as onnx_model; FileError when
/// the file cannot be written.
void save_onnx(const ExportedProgram& program, const std::string& path,
               const OnnxOptions& options = {});

/// One aten operator that has an ONNX form, and what it becomes.
struct OnnxOperator {
  /// The aten operator (`linear`, `max.dim`: an overload only where others are refused).
  std::string_view aten;
  /// The ONNX ops it becomes (`Gemm (2-D input), else MatMul + Add`).
  std::string_view onnx;
};

/// Every aten operator the exporter maps, sorted by name: the README's table.
std::vector<OnnxOperator> onnx_operators();

}  // namespace tdfx
