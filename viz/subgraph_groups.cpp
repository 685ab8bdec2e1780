#include "tdfx/viz/subgraph_groups.h"

#include <utility>

namespace tdfx::detail {

SubgraphGroups::SubgraphGroups(std::string& out, size_t siblings, std::string indent)
    : out_(out), base_(std::move(indent)), indent_(base_) {
  // Levels: the fewest with kSubgraphFanout^(depth + 1) >= siblings (8 levels hold 16^9).
  size_t capacity = kSubgraphFanout;
  while (capacity < siblings && depth_ < 8) {
    capacity *= kSubgraphFanout;
    ++depth_;
  }
  size_t span = kSubgraphFanout;
  for (size_t level = depth_; level-- > 0;) {
    span_[level] = span;
    span *= kSubgraphFanout;
  }
}

const std::string& SubgraphGroups::next() {
  const size_t i = written_++;
  // The outermost level whose group this sibling starts; every deeper one starts one too.
  size_t level = 0;
  while (level < depth_ && i % span_[level] != 0) ++level;
  if (level == depth_) return indent_;
  for (; open_ > level; --open_) {
    indent_.resize(indent_.size() - 2);
    out_ += indent_ + "}\n";
  }
  for (; open_ < depth_; ++open_) {
    out_ += indent_ + "subgraph {\n";
    indent_ += "  ";
  }
  return indent_;
}

void SubgraphGroups::close() {
  for (; open_ > 0; --open_) {
    indent_.resize(indent_.size() - 2);
    out_ += indent_ + "}\n";
  }
}

}  // namespace tdfx::detail
