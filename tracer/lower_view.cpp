#include "tdfx/tracer/lower_view.h"

#include "tdfx/graph/graph_printer.h"
#include "tdfx/graph/namespace.h"
#include "tdfx/graph/schema_arguments.h"

namespace tdfx::detail {

namespace {

// Lowers a view in one walk (see lower_view.h).
class ViewLowering {
 public:
  explicit ViewLowering(const std::shared_ptr<torch::nn::Module>& root) : root_(root) {}

  Graph build(const Graph& printed, std::vector<NestedKey>& input_keys) {
    input_keys_ = &input_keys;
    for (const Node* node : printed.nodes()) {
      if (node->op() == OpCode::kPlaceholder && node->target().str() == "tensordict") {
        tensordict_ = node;
        input_keys.clear();  // the reads give them, in order
      }
    }
    copy_nodes(printed, nullptr, "");
    out_.lint();
    return std::move(out_);
  }

 private:
  Argument map(const Argument& arg) const {
    if (const Node* node = arg.node()) return env_.at(node);
    if (arg.is<ArgumentList>()) {
      const auto& list = arg.as<ArgumentList>();
      std::vector<Argument> items;
      items.reserve(list.items.size());
      for (const Argument& item : list.items) items.push_back(map(item));
      return ArgumentList{std::move(items), list.is_tuple};
    }
    return arg;
  }
  Args map_all(const Args& args) const {
    Args out;
    out.reserve(args.size());
    for (const Argument& arg : args) out.push_back(map(arg));
    return out;
  }
  Kwargs map_all(const Kwargs& kwargs) const {
    Kwargs out;
    for (const auto& [name, arg] : kwargs) out.emplace_back(name, map(arg));
    return out;
  }
  static const std::string& name_of(const Node& node) { return node.name(); }

  // Copies `graph`'s nodes; `call` is the call_module whose body it is (null for the top),
  // `prefix` its target with a dot.
  void copy_nodes(const Graph& graph, const Node* call, const std::string& prefix) {
    size_t next_arg = 0;
    for (const Node* node : graph.nodes()) {
      switch (node->op()) {
        case OpCode::kPlaceholder:
          if (call) {
            env_[node] = map(call->args().at(next_arg++));
          } else if (node != tensordict_) {
            env_[node] = add_placeholder(*node, node->target().str());
          }
          continue;
        case OpCode::kOutput:
          if (call) {
            env_[call] = map(node->args().at(0));
          } else {
            finish(out_.output(map(node->args().at(0))), *node, nullptr);
          }
          continue;
        case OpCode::kCallModule:
          if (node->body()) {
            copy_nodes(*node->body(), node, prefix + node->target().str() + ".");
            continue;
          }
          break;
        case OpCode::kGetAttr: {
          const std::string path = prefix + node->target().str();
          Node*& read = attribute_reads_[tensor_at(path)];
          if (!read || !tensor_at(path)) {
            read = finish(out_.create_node(OpCode::kGetAttr, Target(path), {}, {}, name_of(*node)),
                          *node, call);
          }
          env_[node] = read;
          continue;
        }
        case OpCode::kCallMethod:
          if (node->target().has_operator()) {
            env_[node] =
                finish(out_.create_node(OpCode::kCallFunction, node->target().as_function(),
                                        map_all(schema_arguments(*node)), {}, name_of(*node)),
                       *node, call, /*method=*/true);
            continue;
          }
          break;
        case OpCode::kCallFunction:
          if (node->target().is_getitem() && tensordict_ &&
              node->args().at(0).node() == tensordict_) {
            const auto& key = node->args().at(1).as<NestedKey>();
            input_keys_->push_back(key);
            env_[node] = add_placeholder(*node, parameter_name(key.joined("_")));
            continue;
          }
          if (node->target().is_getitem()) {
            // An item of a body's tuple result is that item.
            const Argument source = map(node->args().at(0));
            if (source.is<ArgumentList>() && node->args().at(1).is<int64_t>()) {
              env_[node] = source.as<ArgumentList>().items.at(
                  static_cast<size_t>(node->args()[1].as<int64_t>()));
              continue;
            }
          }
          break;
      }
      env_[node] = finish(out_.create_node(node->op(), node->target(), map_all(node->args()),
                                           map_all(node->kwargs()), name_of(*node)),
                          *node, call);
    }
  }

  Node* add_placeholder(const Node& node, const std::string& target) {
    Node* input;
    {
      auto guard = first_op_ ? out_.inserting_before(first_op_) : Graph::InsertGuard(out_, nullptr);
      input = out_.placeholder(target);
    }
    input->meta() = node.meta();
    return input;
  }

  Node* finish(Node* copy, const Node& node, const Node* call, bool method = false) {
    if (!first_op_ && copy->op() != OpCode::kPlaceholder) first_op_ = copy;
    NodeMeta& meta = copy->meta();
    meta = node.meta();
    if (call) {
      const NodeMeta& called = call->meta();
      meta.module_path = called.module_path;
      meta.module_type = called.module_type;
      meta.td_module = called.td_module;
      meta.shown_as = called.shown_as.empty() ? describe(*call) : called.shown_as;
    } else if (meta.shown_as.empty() && (method || copy->name() != node.name())) {
      meta.shown_as = describe(node);  // errors name the node as printed
    }
    return copy;
  }

  // The tensor of root_ at `path`, or null: bodies that read one tensor (a layer shared by two
  // TensorDictModules) share its get_attr, as its first path.
  const c10::TensorImpl* tensor_at(const std::string& path) {
    if (!root_) return nullptr;
    if (tensors_.empty()) {
      for (const auto& item : root_->named_parameters(true))
        tensors_[item.key()] = item.value().unsafeGetTensorImpl();
      for (const auto& item : root_->named_buffers(true))
        tensors_[item.key()] = item.value().unsafeGetTensorImpl();
    }
    auto it = tensors_.find(path);
    return it == tensors_.end() ? nullptr : it->second;
  }

  std::shared_ptr<torch::nn::Module> root_;
  std::unordered_map<std::string, const c10::TensorImpl*> tensors_;
  std::unordered_map<const c10::TensorImpl*, Node*> attribute_reads_;
  Graph out_;
  const Node* tensordict_ = nullptr;
  Node* first_op_ = nullptr;
  std::vector<NestedKey>* input_keys_ = nullptr;
  std::unordered_map<const Node*, Argument> env_;
};

}  // namespace

Graph lower_view(const Graph& view, const std::shared_ptr<torch::nn::Module>& root,
                 std::vector<NestedKey>& input_keys) {
  return ViewLowering(root).build(view, input_keys);
}

}  // namespace tdfx::detail
