// Loss: what a backward pass starts from (gradients.h).
#include <fmt/format.h>

#include "tdfx/core/error.h"
#include "tdfx/debug/gradients.h"

namespace tdfx {

Loss Loss::sum() { return Loss(); }

Loss Loss::output(std::string name, Reduction reduction) {
  Loss loss;
  loss.kind_ = Kind::kOutput;
  loss.output_ = std::move(name);
  loss.reduction_ = reduction;
  return loss;
}

Loss Loss::of(std::function<at::Tensor(const std::vector<at::Tensor>&)> fn) {
  if (!fn) fail<Error>("Loss::of: the function is empty");
  Loss loss;
  loss.kind_ = Kind::kFunction;
  loss.fn_ = std::move(fn);
  return loss;
}

std::string Loss::describe() const {
  switch (kind_) {
    case Kind::kSum:
      return "sum of every output";
    case Kind::kOutput:
      return fmt::format("{} of {}", reduction_ == Reduction::kSum ? "sum" : "mean", output_);
    case Kind::kFunction:
      return "a function of the outputs";
  }
  return "";
}

at::Tensor Loss::compute(const std::vector<at::Tensor>& outputs,
                         const std::vector<std::vector<std::string>>& names) const {
  auto floating = [](const at::Tensor& t) {
    return t.defined() && at::isFloatingType(t.scalar_type());
  };
  switch (kind_) {
    case Kind::kSum: {
      at::Tensor total;
      for (const at::Tensor& out : outputs) {
        if (!floating(out)) continue;
        total = total.defined() ? total + out.sum() : out.sum();
      }
      if (!total.defined()) fail<Error>("loss: the graph has no floating output to sum");
      return total;
    }
    case Kind::kOutput:
      // A key first: a node of the same name (`linear`, when a key is named so too) comes
      // second.
      for (size_t rank = 0; rank < 2; ++rank) {
        for (size_t i = 0; i < outputs.size() && i < names.size(); ++i) {
          if (names[i].size() <= rank || names[i][rank] != output_) continue;
          if (!floating(outputs[i])) {
            fail<Error>("loss: output {} is not a floating tensor", output_);
          }
          return reduction_ == Reduction::kSum ? outputs[i].sum() : outputs[i].mean();
        }
      }
      {
        std::vector<std::string> known;
        for (const auto& n : names) {
          if (n.empty()) continue;
          known.push_back(n.size() > 1 ? fmt::format("'{}' (node {})", n[0], n[1])
                                       : fmt::format("'{}'", n[0]));
        }
        fail<Error>("loss: no output is named '{}'; the outputs are {}", output_,
                    fmt::join(known, ", "));
      }
    case Kind::kFunction: {
      at::Tensor loss = fn_(outputs);
      if (!loss.defined() || loss.numel() != 1 || !at::isFloatingType(loss.scalar_type())) {
        fail<Error>("loss: the loss function must return a floating tensor with one element");
      }
      return loss.reshape({});
    }
  }
  fail<InternalError>("loss: unknown kind");
}

}  // namespace tdfx
