#include "export/archive.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <unordered_map>

#include "core/error.h"

namespace tdfx {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "tdfx.exported_program";
constexpr int kVersion = 1;

// --- to JSON ------------------------------------------------------------------

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
    json operator()(c10::ScalarType v) const { return {{"dtype", static_cast<int>(v)}}; }
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
    if (tensor.dtype) meta["dtype"] = static_cast<int>(*tensor.dtype);
    if (tensor.shape) meta["shape"] = *tensor.shape;
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

// --- from JSON ----------------------------------------------------------------

// Every read of the document goes through these: a wrong type or a missing
// field is an ArchiveError saying where, never a crash.
const json& field(const json& object, const char* name, const std::string& where) {
  if (!object.is_object() || !object.contains(name)) {
    fail<ArchiveError>("{}: missing field '{}'", where, name);
  }
  return object.at(name);
}

std::string text(const json& object, const char* name, const std::string& where) {
  const json& value = field(object, name, where);
  if (!value.is_string()) fail<ArchiveError>("{}: field '{}' is not a string", where, name);
  return value.get<std::string>();
}

const json& array(const json& object, const char* name, const std::string& where) {
  const json& value = field(object, name, where);
  if (!value.is_array()) fail<ArchiveError>("{}: field '{}' is not a list", where, name);
  return value;
}

NestedKey key_from_json(const json& parts, bool is_tuple, const std::string& where) {
  if (!parts.is_array() || parts.empty())
    fail<ArchiveError>("{}: a key must be a non-empty list", where);
  std::vector<std::string> items;
  for (const json& part : parts) {
    if (!part.is_string()) fail<ArchiveError>("{}: a key part is not a string", where);
    items.push_back(part.get<std::string>());
  }
  if (items.size() == 1 && !is_tuple) return NestedKey(items[0]);
  if (items.size() == 1) return NestedKey({items[0]});
  return NestedKey(std::move(items));
}

c10::ScalarType dtype_from_json(const json& value, const std::string& where) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() >= static_cast<int64_t>(c10::ScalarType::NumOptions)) {
    fail<ArchiveError>("{}: invalid dtype {}", where, value.dump());
  }
  return static_cast<c10::ScalarType>(value.get<int>());
}

c10::Device device_from_json(const json& value, const std::string& where) {
  if (!value.is_string()) fail<ArchiveError>("{}: a device must be a string", where);
  try {
    return c10::Device(value.get<std::string>());
  } catch (const c10::Error&) {
    fail<ArchiveError>("{}: invalid device '{}'", where, value.get<std::string>());
  }
}

class GraphReader {
 public:
  explicit GraphReader(std::string where) : where_(std::move(where)) {}

  Graph read(const json& nodes, int depth = 0) {
    if (depth > 8) fail<ArchiveError>("{}: bodies nested too deeply", where_);
    if (!nodes.is_array()) fail<ArchiveError>("{}: 'nodes' is not a list", where_);
    Graph graph;
    std::unordered_map<std::string, Node*> by_name;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const json& entry = nodes[i];
      const std::string where = fmt::format("{}: node {}", where_, i);
      const std::string name = text(entry, "name", where);
      const std::string op = text(entry, "op", where);
      const std::string target_text = text(entry, "target", where);
      auto arg = [&](const json& value) { return argument(value, by_name, where); };
      Args args;
      for (const json& value : array(entry, "args", where)) args.push_back(arg(value));
      Kwargs kwargs;
      for (const json& pair : array(entry, "kwargs", where)) {
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
          fail<ArchiveError>("{}: a keyword argument must be [name, value]", where);
        }
        kwargs.emplace_back(pair[0].get<std::string>(), arg(pair[1]));
      }
      Node* node = nullptr;
      try {
        node = create(graph, op, target_text, std::move(args), std::move(kwargs), name, where);
      } catch (const ArchiveError&) {
        throw;
      } catch (const Error& e) {
        fail<ArchiveError>("{}: {}", where, e.what());
      }
      if (node->name() != name) {
        fail<ArchiveError>("{}: node name '{}' is invalid or used twice", where, name);
      }
      read_meta(field(entry, "meta", where), node->meta(), where);
      if (entry.contains("body")) {
        node->set_body(
            std::make_shared<Graph>(GraphReader(where + " body").read(entry["body"], depth + 1)));
      }
      by_name[name] = node;
    }
    try {
      graph.lint();
    } catch (const GraphError& e) {
      fail<ArchiveError>("{}: the graph is malformed: {}", where_, e.what());
    }
    return graph;
  }

 private:
  static Node* create(Graph& graph, const std::string& op, const std::string& target, Args args,
                      Kwargs kwargs, const std::string& name, const std::string& where) {
    if (op == "placeholder")
      return graph.create_node(OpCode::kPlaceholder, Target(target), {}, {}, name);
    if (op == "get_attr") return graph.create_node(OpCode::kGetAttr, Target(target), {}, {}, name);
    if (op == "call_module") {
      return graph.create_node(OpCode::kCallModule, Target(target), std::move(args),
                               std::move(kwargs), name);
    }
    if (op == "call_method") {
      return graph.create_node(OpCode::kCallMethod, Target(target), std::move(args),
                               std::move(kwargs), name);
    }
    if (op == "output") {
      if (args.size() != 1) fail<ArchiveError>("{}: output takes one argument", where);
      return graph.create_node(OpCode::kOutput, Target("output"), std::move(args), {}, name);
    }
    if (op == "call_function") {
      Target t = target == "operator.getitem" ? Target::getitem() : Target::aten(target);
      return graph.create_node(OpCode::kCallFunction, std::move(t), std::move(args),
                               std::move(kwargs), name);
    }
    fail<ArchiveError>("{}: unknown op '{}'", where, op);
  }

  Argument argument(const json& value, const std::unordered_map<std::string, Node*>& nodes,
                    const std::string& where) {
    if (!value.is_object() || value.size() < 1) fail<ArchiveError>("{}: malformed argument", where);
    if (value.contains("none")) return None{};
    if (value.contains("bool") && value["bool"].is_boolean()) return value["bool"].get<bool>();
    if (value.contains("int") && value["int"].is_number_integer())
      return value["int"].get<int64_t>();
    if (value.contains("float")) {
      const json& f = value["float"];
      if (f.is_number()) return f.get<double>();
      if (f == "inf") return std::numeric_limits<double>::infinity();
      if (f == "-inf") return -std::numeric_limits<double>::infinity();
      if (f == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    if (value.contains("str") && value["str"].is_string()) return value["str"].get<std::string>();
    if (value.contains("key")) {
      const bool is_tuple = value.contains("is_tuple") && value["is_tuple"].is_boolean() &&
                            value["is_tuple"].get<bool>();
      return key_from_json(value["key"], is_tuple, where);
    }
    if (value.contains("dtype")) return dtype_from_json(value["dtype"], where);
    if (value.contains("device")) return device_from_json(value["device"], where);
    if (value.contains("node") && value["node"].is_string()) {
      auto it = nodes.find(value["node"].get<std::string>());
      if (it == nodes.end()) {
        fail<ArchiveError>("{}: reads node '{}', which is not defined before it", where,
                           value["node"].get<std::string>());
      }
      return it->second;
    }
    for (const char* kind : {"list", "tuple"}) {
      if (value.contains(kind) && value[kind].is_array()) {
        ArgumentList items{{}, std::string(kind) == "tuple"};
        for (const json& item : value[kind]) items.items.push_back(argument(item, nodes, where));
        return items;
      }
    }
    fail<ArchiveError>("{}: malformed argument {}", where, value.dump().substr(0, 80));
  }

  static void read_meta(const json& meta, NodeMeta& out, const std::string& where) {
    out.module_path = text(meta, "module_path", where);
    out.module_type = text(meta, "module_type", where);
    out.td_module = text(meta, "td_module", where);
    if (meta.contains("dtype")) out.tensor.dtype = dtype_from_json(meta["dtype"], where);
    if (meta.contains("device")) out.tensor.device = device_from_json(meta["device"], where);
    if (meta.contains("shape")) {
      if (!meta["shape"].is_array()) fail<ArchiveError>("{}: shape is not a list", where);
      std::vector<int64_t> shape;
      for (const json& d : meta["shape"]) {
        if (!d.is_number_integer()) fail<ArchiveError>("{}: a dimension is not an int", where);
        shape.push_back(d.get<int64_t>());
      }
      out.tensor.shape = std::move(shape);
    }
  }

  std::string where_;
};

GraphSignature signature_from_json(const json& value, const std::string& where) {
  GraphSignature signature;
  for (const json& in : array(value, "inputs", where)) {
    const std::string kind = text(in, "kind", where);
    InputKind k;
    if (kind == "parameter") {
      k = InputKind::kParameter;
    } else if (kind == "buffer") {
      k = InputKind::kBuffer;
    } else if (kind == "user_input") {
      k = InputKind::kUserInput;
    } else {
      fail<ArchiveError>("{}: unknown input kind '{}'", where, kind);
    }
    signature.inputs.push_back({k, text(in, "name", where), text(in, "target", where)});
  }
  for (const json& out : array(value, "outputs", where)) {
    const bool is_tuple =
        out.contains("is_tuple") && out["is_tuple"].is_boolean() && out["is_tuple"].get<bool>();
    signature.outputs.push_back(
        {text(out, "name", where), key_from_json(field(out, "key", where), is_tuple, where)});
  }
  return signature;
}

std::string read_record(caffe2::serialize::PyTorchStreamReader& reader, const std::string& name,
                        const std::string& where) {
  if (!reader.hasRecord(name))
    fail<ArchiveError>("{}: not a tdfx archive (no record '{}')", where, name);
  auto [data, size] = reader.getRecord(name);
  return std::string(static_cast<const char*>(data.get()), size);
}

ExportedProgram read_archive(caffe2::serialize::PyTorchStreamReader& reader,
                             const std::string& where) {
  const json document = json::parse(read_record(reader, "program.json", where), nullptr, false);
  if (document.is_discarded()) fail<ArchiveError>("{}: program.json is not valid JSON", where);
  if (!document.is_object() || text(document, "format", where) != kFormat) {
    fail<ArchiveError>("{}: not a tdfx exported program", where);
  }
  const json& version = field(document, "version", where);
  if (!version.is_number_integer() || version.get<int>() != kVersion) {
    fail<ArchiveError>("{}: archive version {} is not supported (expected {})", where,
                       version.dump(), kVersion);
  }
  Graph graph = GraphReader(where).read(field(document, "nodes", where));
  GraphSignature signature = signature_from_json(field(document, "signature", where), where);

  const std::string weights_bytes = read_record(reader, "weights.pkl", where);
  c10::IValue weights =
      torch::jit::pickle_load(std::vector<char>(weights_bytes.begin(), weights_bytes.end()));
  if (!weights.isGenericDict())
    fail<ArchiveError>("{}: weights.pkl does not hold a dictionary", where);
  std::map<std::string, at::Tensor> state;
  for (const auto& item : weights.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) {
      fail<ArchiveError>("{}: weights.pkl holds a non-tensor entry", where);
    }
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  // The signature must name exactly the graph's placeholders, in order.
  std::vector<std::string> placeholders;
  for (const Node* node : graph.nodes()) {
    if (node->op() == OpCode::kPlaceholder) placeholders.push_back(node->name());
  }
  if (placeholders.size() != signature.inputs.size()) {
    fail<ArchiveError>("{}: the signature lists {} inputs but the graph has {} placeholders", where,
                       signature.inputs.size(), placeholders.size());
  }
  for (size_t i = 0; i < placeholders.size(); ++i) {
    if (placeholders[i] != signature.inputs[i].name) {
      fail<ArchiveError>("{}: signature input {} is '{}' but the placeholder is '{}'", where, i,
                         signature.inputs[i].name, placeholders[i]);
    }
  }
  return ExportedProgram(std::move(graph), std::move(signature), std::move(state));
}

template <typename Fn>
ExportedProgram guarded(const std::string& where, Fn&& fn) {
  try {
    return fn();
  } catch (const ArchiveError&) {
    throw;
  } catch (const c10::Error& e) {
    fail<ArchiveError>("{}: cannot read the archive: {}", where, e.what_without_backtrace());
  } catch (const std::exception& e) {
    fail<ArchiveError>("{}: cannot read the archive: {}", where, e.what());
  }
}

}  // namespace

std::string program_json(const ExportedProgram& program) {
  json document = {{"format", kFormat},
                   {"version", kVersion},
                   {"nodes", graph_to_json(program.graph())},
                   {"signature", signature_to_json(program.graph_signature())}};
  return document.dump(1);
}

void save(const ExportedProgram& program, const std::string& path) {
  const std::string document = program_json(program);
  c10::Dict<std::string, at::Tensor> weights;
  for (const auto& [name, tensor] : program.state()) weights.insert(name, tensor.detach());
  const std::vector<char> weight_bytes = torch::jit::pickle_save(weights);

  std::random_device random;
  const std::string temporary = fmt::format("{}.tmp-{:08x}", path, random());
  try {
    {
      caffe2::serialize::PyTorchStreamWriter writer(temporary);
      writer.writeRecord("version", "1\n", 2);
      writer.writeRecord("program.json", document.data(), document.size());
      writer.writeRecord("weights.pkl", weight_bytes.data(), weight_bytes.size());
      writer.writeEndOfFile();
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      fail<ArchiveError>("cannot save {}: renaming the temporary file failed", path);
    }
  } catch (const ArchiveError&) {
    std::remove(temporary.c_str());
    throw;
  } catch (const std::exception& e) {
    std::remove(temporary.c_str());
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    fail<ArchiveError>("cannot save {}: {}", path,
                       c10_error ? c10_error->what_without_backtrace() : e.what());
  }
}

ExportedProgram load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<ArchiveError>("{}: cannot open the file", path);
  return load(in, path);
}

ExportedProgram load(std::istream& in, const std::string& name) {
  return guarded(name, [&] {
    caffe2::serialize::PyTorchStreamReader reader(&in);
    return read_archive(reader, name);
  });
}

}  // namespace tdfx
