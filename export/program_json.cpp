// Writing program.json: the graph, signature and module table as JSON, each tensor (weights,
// example inputs, an optimizer's state) as a record of raw bytes with its entry, and the
// document's text.

#include "tdfx/export/program_json.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/enum_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/utf8.h"
#include "tdfx/export/archive_format.h"
#include "tdfx/export/json_checks.h"
#include "tdfx/export/module_table.h"

namespace tdfx::detail {

using nlohmann::json;

namespace {

json argument_to_json(const Argument& arg) {
  struct Visitor {
    json operator()(None) const { return {{"none", nullptr}}; }
    json operator()(bool v) const { return {{"bool", v}}; }
    json operator()(int64_t v) const { return {{"int", v}}; }
    json operator()(double v) const {
      if (std::isfinite(v)) return {{"float", v}};
      return {{"float", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf")}};
    }
    json operator()(const std::string& v) const { return {{"str", v}}; }
    json operator()(const NestedKey& v) const {
      return {{"key", v.parts()}, {"is_tuple", v.is_tuple()}};
    }
    json operator()(c10::ScalarType v) const { return {{"dtype", dtype_name(v)}}; }
    json operator()(c10::MemoryFormat v) const {
      return {{"memory_format", memory_format_name(v)}};
    }
    json operator()(c10::Layout v) const { return {{"layout", layout_name(v)}}; }
    json operator()(const c10::Device& v) const { return {{"device", v.str()}}; }
    json operator()(Node* v) const { return {{"node", v->name()}}; }
    json operator()(const ArgumentList& v) const {
      json items = json::array();
      for (const auto& item : v.items) items.push_back(argument_to_json(item));
      return {{v.is_tuple ? "tuple" : "list", items}};
    }
  };
  return std::visit(Visitor{}, arg.value);
}

json graph_to_json(const Graph& graph) {
  json nodes = json::array();
  for (const Node* node : graph.nodes()) {
    json args = json::array();
    for (const auto& arg : node->args()) args.push_back(argument_to_json(arg));
    json kwargs = json::array();
    for (const auto& [key, arg] : node->kwargs()) kwargs.push_back({key, argument_to_json(arg)});
    json meta = {{"module_path", node->meta().module_path},
                 {"module_type", node->meta().module_type},
                 {"td_module", node->meta().td_module}};
    const TensorMeta& tensor = node->meta().tensor;
    if (tensor.dtype) meta["dtype"] = dtype_name(*tensor.dtype);
    if (tensor.shape) meta["shape"] = *tensor.shape;
    if (!tensor.batch_dims.empty()) meta["batch_dims"] = tensor.batch_dims;
    if (!tensor.derived_dims.empty()) {
      json derived = json::array();
      for (const DerivedDim& d : tensor.derived_dims) {
        derived.push_back({d.dim, d.size.scale, d.size.divisor, d.size.offset});
      }
      meta["derived_dims"] = derived;
    }
    if (tensor.device) meta["device"] = tensor.device->str();
    json entry = {{"name", node->name()},
                  {"op", std::string(to_string(node->op()))},
                  {"target", node->target().str()},
                  {"args", args},
                  {"kwargs", kwargs},
                  {"meta", meta}};
    if (node->body()) entry["body"] = graph_to_json(*node->body());
    nodes.push_back(entry);
  }
  return nodes;
}

json signature_to_json(const GraphSignature& signature) {
  json inputs = json::array();
  for (const auto& in : signature.inputs) {
    inputs.push_back(
        {{"kind", std::string(to_string(in.kind))}, {"name", in.name}, {"target", in.target}});
  }
  json outputs = json::array();
  for (const auto& out : signature.outputs) {
    outputs.push_back(
        {{"name", out.name}, {"key", out.key.parts()}, {"is_tuple", out.key.is_tuple()}});
  }
  return {{"inputs", inputs}, {"outputs", outputs}};
}

// --- weights ------------------------------------------------------------------

void add_tensor_record(WeightRecords& out, json& entries, const std::string& name,
                       const at::Tensor& value, const char* folder, const char* kind) {
  at::Tensor tensor = value.detach().cpu().contiguous();
  if (!dtype_from_name(dtype_name(tensor.scalar_type()))) {
    fail<ArchiveError>("{} {} has dtype {}, which archives do not store", kind, name,
                       dtype_repr(tensor.scalar_type()));
  }
  const std::string record = fmt::format("{}/{}", folder, entries.size());
  entries.push_back({{"name", name},
                     {"record", record},
                     {"dtype", dtype_name(tensor.scalar_type())},
                     {"shape", tensor.sizes().vec()}});
  out.records.emplace_back(record, std::move(tensor));
}

json program_document(const ExportedProgram& program, const WeightRecords& weights) {
  const bool inputs = !weights.inputs.empty();
  const bool optimizer = !weights.optimizer.is_null();
  json document = {{"format", kFormat},
                   {"version", optimizer ? kVersionWithOptimizer
                               : inputs  ? kVersionWithInputs
                                         : kVersionWithoutInputs},
                   {"nodes", graph_to_json(program.graph())},
                   {"signature", signature_to_json(program.graph_signature())},
                   {"weights", weights.entries},
                   {"modules", detail::modules_to_json(program.modules())}};
  if (inputs) document["inputs"] = weights.inputs;
  if (optimizer) document["optimizer"] = weights.optimizer;
  if (const auto& s = program.batch_specialisation()) {
    document["batch_specialisation"] = {
        {"traced_batch", s->traced_batch}, {"node", s->node}, {"module", s->module}};
  }
  return document;
}

// The first string in `value` that is not UTF-8 (JSON cannot hold it), with where it is:
// `signature.inputs[1].target`.
std::optional<std::pair<std::string, std::string>> first_non_utf8(const json& value,
                                                                  const std::string& where) {
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (!is_utf8(text)) return std::make_pair(where, text);
  } else if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      if (auto bad = first_non_utf8(item, where.empty() ? key : where + "." + key)) return bad;
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      if (auto bad = first_non_utf8(value[i], fmt::format("{}[{}]", where, i))) return bad;
    }
  }
  return std::nullopt;
}

}  // namespace

WeightRecords weight_records(const ExportedProgram& program) {
  WeightRecords out;
  for (const InputSpec& in : program.graph_signature().inputs) {
    if (in.kind == InputKind::kUserInput) continue;
    add_tensor_record(out, out.entries, in.name, program.state().at(in.name), "weights", "weight");
  }
  for (const auto& [name, tensor] : program.example_inputs()) {
    add_tensor_record(out, out.inputs, name, tensor, "inputs", "example input");
  }
  if (const auto& optimizer = program.optimizer_state()) {
    // {"type": "Adam", "groups": [{"options": {...}, "parameters": [...]}], "state":
    //  [{"parameter": ..., "step": 120, "tensors": [{"name": "exp_avg", "record": ...}]}]}
    json groups = json::array(), state = json::array(), tensor_entries = json::array();
    for (const OptimizerState::Group& group : optimizer->groups) {
      groups.push_back({{"options", group.options}, {"parameters", group.parameters}});
    }
    for (const auto& [name, parameter] : optimizer->parameters) {
      json tensors = json::array();
      for (const auto& [tensor_name, tensor] : parameter.tensors) {
        add_tensor_record(out, tensor_entries, tensor_name, tensor, "optimizer",
                          "optimizer state tensor");
        // Records count across the whole state: `optimizer/<N>`, N from every tensor before.
        tensors.push_back(std::move(tensor_entries.back()));
      }
      state.push_back({{"parameter", name}, {"step", parameter.step}, {"tensors", tensors}});
    }
    out.optimizer = {{"type", optimizer->type}, {"groups", groups}, {"state", state}};
  }
  return out;
}

std::string document_text(const ExportedProgram& program, const WeightRecords& weights) {
  const json document = program_document(program, weights);
  if (auto bad = first_non_utf8(document, "")) {
    fail<ArchiveError>("{} '{}' is not UTF-8 text, which is all an archive keeps", bad->first,
                       detail::byte_escaped(bad->second));
  }
  return document.dump(1);
}

}  // namespace tdfx::detail
