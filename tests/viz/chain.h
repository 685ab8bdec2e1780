#pragma once
// The viz tests' graphs with their options: samples/drawn_chain.h's, under the tests' names.

#include "samples/drawn_chain.h"

namespace tdfx::testing {

using Chain = samples::DrawnGraph;
using samples::module_chain;

}  // namespace tdfx::testing
