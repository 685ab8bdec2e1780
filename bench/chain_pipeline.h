#pragma once
// The benchmarks' pipeline, samples/chain.h's chain, and its static trace.

#include "samples/chain.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace tdfx::bench {

using samples::Chain;
using samples::chain;
using samples::chain_input;
using samples::ChainLink;
using samples::ChainLinkImpl;

/// A chain, its input and its static trace on that input.
struct TracedChain {
  explicit TracedChain(int64_t length)
      : chain(bench::chain(length)),
        input(chain_input()),
        gm(symbolic_trace(chain.pipeline, input)) {}
  Chain chain;
  TensorDict input;
  TDGraphModule gm;
};

}  // namespace tdfx::bench
