// tdfx's whole public API in one header: #include <tdfx/tdfx.h>.
//
// Each component's headers can also be included alone (<tdfx/graph/graph.h>, ...); this
// header includes the ones a user of the library calls into, errors first.
#pragma once

// Errors: tdfx::Error and the categories callers catch apart (KeyError, TraceError, ...).
#include "tdfx/core/error.h"
#include "tdfx/core/nested_key.h"

// TensorDict and the modules that read and write it.
#include "tdfx/tensordict/modules.h"
#include "tdfx/tensordict/tensordict.h"

// The graph IR, running it, and FX's tools over it.
#include "tdfx/graph/graph.h"
#include "tdfx/graph/graph_module.h"
#include "tdfx/graph/interpreter.h"
#include "tdfx/graph/passes.h"
#include "tdfx/graph/tabular.h"
#include "tdfx/graph/value_type.h"

// Python code printers.
#include "tdfx/codegen/python_code.h"

// Tracing TensorDict modules into graphs, and drawing them.
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tdfx/viz/page.h"
#include "tdfx/viz/render.h"

// Exported programs: archives (.pt2), tensor files, ONNX. TorchScript export has its own
// header, <tdfx/export/torchscript.h>, the one tdfx header that includes LibTorch's JIT API;
// none of these does.
#include "tdfx/diagram/program_diagram.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/export/program_diff.h"
#include "tdfx/export/tensor_file.h"
#include "tdfx/onnx/onnx_export.h"

// Looking inside a run: statistics, NaN/Inf origin, profiles, diagram overlays.
#include "tdfx/debug/first_nonfinite.h"
#include "tdfx/debug/gradients.h"
#include "tdfx/debug/node_stats.h"
#include "tdfx/debug/profile.h"
#include "tdfx/diagram/overlay.h"
