#pragma once

/// \file
/// ModuleBox: one TensorDictModule or nested TensorDictSequential of a pipeline as plain
/// data (path, keys, type, parameter counts), which traces, exported programs and
/// diagrams keep. tracer/module_tree.h reads them from a pipeline.

#include <cstdint>
#include <string>
#include <vector>

#include "tdfx/core/nested_key.h"

namespace tdfx {

/// A TensorDictModule (or a nested TensorDictSequential) of the pipeline. In the op view,
/// one labelled box around the nodes its call produced (those with
/// `NodeMeta::td_module == path`); in the module view, one node (a sequential: a box
/// around its children). A box whose path extends another's (`0.module.1` in `0`) is
/// drawn inside it.
struct ModuleBox {
  /// Its path in the module tree ("0", "0.module.1").
  std::string path;
  /// The wrapped module's configuration (`Linear(in_features=3, out_features=4, bias=true)`);
  /// may be "". Long text wraps.
  std::string label;
  /// The keys it reads.
  std::vector<NestedKey> in_keys;
  /// The keys it writes.
  std::vector<NestedKey> out_keys;
  /// The wrapped module's type as its user knows it (`Linear`, `Net`), or
  /// `TensorDictSequential`; may be "".
  std::string type;
  /// A TensorDictSequential: a box around its children, never a node of its own.
  bool sequential = false;
  /// Number of parameter elements (a shared layer counts in each module that calls it).
  int64_t parameters = 0;
  /// Number of buffer elements (BatchNorm's running statistics).
  int64_t buffers = 0;
};

}  // namespace tdfx
