#include "tdfx/tracer/lower_view.h"

#include <unordered_map>

#include "tdfx/graph/graph_printer.h"
#include "tdfx/graph/passes.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx::detail {
namespace {

// The tensor of `root` at each path, so that bodies reading one tensor (a layer shared by two
// TensorDictModules) share one get_attr.
std::unordered_map<std::string, const c10::TensorImpl*> tensors_by_path(
    const std::shared_ptr<torch::nn::Module>& root) {
  std::unordered_map<std::string, const c10::TensorImpl*> tensors;
  if (!root) return tensors;
  for (const auto& item : root->named_parameters(true)) {
    tensors[item.key()] = item.value().unsafeGetTensorImpl();
  }
  for (const auto& item : root->named_buffers(true)) {
    tensors[item.key()] = item.value().unsafeGetTensorImpl();
  }
  return tensors;
}

}  // namespace

Graph lower_view(const Graph& view, const std::shared_ptr<torch::nn::Module>& root,
                 std::vector<NestedKey>& input_keys) {
  Graph program = view.copy();
  inline_call_modules(program);
  Node* tensordict = nullptr;
  for (Node* node : program.nodes()) {
    if (node->op() == OpCode::kPlaceholder && node->target().str() == "tensordict") {
      tensordict = node;
      input_keys.clear();  // the reads give them, in order
    }
  }
  auto first_op = [&program]() -> Node* {
    for (Node* node : program.nodes()) {
      if (node->op() != OpCode::kPlaceholder) return node;
    }
    return nullptr;
  };
  const auto tensors = tensors_by_path(root);
  std::unordered_map<const c10::TensorImpl*, Node*> attribute_reads;
  for (Node* node : program.node_list()) {
    if (node->op() == OpCode::kCallFunction && node->target().is_getitem() && tensordict &&
        node->args().at(0).node() == tensordict) {
      // A key read is a placeholder named by its key, before any computation, in read order.
      const auto& key = node->args().at(1).as<NestedKey>();
      input_keys.push_back(key);
      Node* input;
      {
        auto guard = program.inserting_before(first_op());
        input = program.placeholder(parameter_name(key.joined("_")));
      }
      input->meta() = node->meta();
      node->replace_all_uses_with(input);
      program.erase_node(node);
    } else if (node->op() == OpCode::kCallMethod && node->target().has_operator()) {
      // What runs is the aten call, every schema argument positional; errors name the method.
      Node* call;
      {
        auto guard = program.inserting_before(node);
        call = program.create_node(OpCode::kCallFunction, node->target().as_function(),
                                   schema_arguments(*node), {}, node->name());
      }
      call->meta() = node->meta();
      if (call->meta().shown_as.empty()) call->meta().shown_as = describe(*node);
      node->replace_all_uses_with(call);
      program.erase_node(node);
    } else if (node->op() == OpCode::kGetAttr) {
      auto tensor = tensors.find(node->target().str());
      if (tensor == tensors.end()) continue;
      Node*& read = attribute_reads[tensor->second];
      if (!read) {
        read = node;
      } else {
        node->replace_all_uses_with(read);
        program.erase_node(node);
      }
    }
  }
  if (tensordict) program.erase_node(tensordict);
  program.lint();
  return program;
}

}  // namespace tdfx::detail
