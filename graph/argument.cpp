#include "tdfx/graph/argument.h"

namespace tdfx {

Argument list(std::vector<Argument> items) { return ArgumentList{std::move(items), false}; }

Argument tuple(std::vector<Argument> items) { return ArgumentList{std::move(items), true}; }

void for_each_node(const Argument& arg, const std::function<void(Node*)>& fn) {
  if (arg.is<Node*>()) {
    fn(arg.as<Node*>());  // null too: graphs refuse it where arguments enter
                          // (Node::check_arguments)
  } else if (arg.is<ArgumentList>()) {
    for (const auto& item : arg.as<ArgumentList>().items) for_each_node(item, fn);
  }
}

Argument map_nodes(const Argument& arg, const std::function<Node*(Node*)>& fn) {
  if (Node* node = arg.node()) return fn(node);
  if (arg.is<ArgumentList>()) {
    ArgumentList out{{}, arg.as<ArgumentList>().is_tuple};
    for (const auto& item : arg.as<ArgumentList>().items) out.items.push_back(map_nodes(item, fn));
    return out;
  }
  return arg;
}

}  // namespace tdfx
