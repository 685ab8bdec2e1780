#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tdfx/viz/subgraph_groups.h"

namespace {

using tdfx::detail::kSubgraphFanout;
using tdfx::detail::SubgraphGroups;

/// `count` sibling subgraphs `{N}` written through SubgraphGroups, one a line.
std::string siblings(size_t count) {
  std::string out;
  SubgraphGroups groups(out, count, "  ");
  for (size_t i = 0; i < count; ++i) out += groups.next() + "{" + std::to_string(i) + "}\n";
  groups.close();
  return out;
}

/// The most subgraphs side by side anywhere in `text` (a line ending in `{` opens one, a line
/// `}` closes it, a line `{N}` is one), and the number of `{N}` lines.
std::pair<size_t, size_t> widest_level(const std::string& text) {
  std::vector<size_t> children{0};
  size_t widest = 0, leaves = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    std::string line = text.substr(start, end - start);
    start = end + 1;
    line.erase(0, line.find_first_not_of(' '));
    if (line == "}") {
      children.pop_back();
    } else {
      widest = std::max(widest, ++children.back());
      if (line.back() == '{') {
        children.push_back(0);
      } else {
        ++leaves;
      }
    }
  }
  REQUIRE(children.size() == 1);  // every group closed
  return {widest, leaves};
}

}  // namespace

TEST_CASE("subgraph groups: up to the fan-out, siblings are written as they are") {
  std::string expected;
  for (size_t i = 0; i < kSubgraphFanout; ++i) expected += "  {" + std::to_string(i) + "}\n";
  CHECK(siblings(kSubgraphFanout) == expected);
  CHECK(siblings(0) == "");
}

TEST_CASE("subgraph groups: one more sibling makes two groups") {
  std::string expected = "  subgraph {\n";
  for (size_t i = 0; i < kSubgraphFanout; ++i) expected += "    {" + std::to_string(i) + "}\n";
  expected += "  }\n  subgraph {\n    {16}\n  }\n";
  CHECK(siblings(kSubgraphFanout + 1) == expected);
}

TEST_CASE("subgraph groups: no level holds more than the fan-out, at any count") {
  for (size_t count : {17, 255, 256, 257, 2500, 70000}) {
    CAPTURE(count);
    const auto [widest, leaves] = widest_level(siblings(count));
    CHECK(widest <= kSubgraphFanout);
    CHECK(leaves == count);
  }
}
