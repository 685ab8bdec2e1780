#include "cli/run.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "cli/commands.h"
#include "tdfx/core/dtype_names.h"
#include "tdfx/core/memory_budget.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/core/text_table.h"
#include "tdfx/core/time_budget.h"
#include "tdfx/debug/first_nonfinite.h"
#include "tdfx/debug/gradients.h"
#include "tdfx/debug/node_stats.h"
#include "tdfx/debug/profile.h"
#include "tdfx/diagram/overlay.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/tensor_file.h"

namespace tdfx::cli {
namespace {

// The widest cells of columns; output keys and input files get the rest of 80 columns.
constexpr size_t kNameWidth = 24;
constexpr size_t kDtypeWidth = 10;
constexpr size_t kShapeWidth = 12;

std::string shape_text(at::IntArrayRef sizes) {
  return fmt::format("[{}]", fmt::join(sizes, ", "));
}

// The traced shape with the dimensions that follow the batch as `s0`, as errors print it.
std::string expected_shape(const TensorMeta& meta) {
  std::vector<std::string> dims;
  for (size_t i = 0; i < meta.shape->size(); ++i) {
    dims.push_back(meta.follows_batch(i) ? "s0" : std::to_string((*meta.shape)[i]));
  }
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

bool fits(const TensorMeta& meta, const at::Tensor& tensor) {
  if (tensor.scalar_type() != *meta.dtype) return false;
  if (static_cast<size_t>(tensor.dim()) != meta.shape->size()) return false;
  for (size_t i = 0; i < meta.shape->size(); ++i) {
    if (!meta.follows_batch(i) && tensor.size(static_cast<int64_t>(i)) != (*meta.shape)[i]) {
      return false;
    }
  }
  return true;
}

// The placeholder metadata of each user input, in signature order.
std::vector<std::pair<std::string, TensorMeta>> user_inputs(const ExportedProgram& program) {
  std::vector<std::pair<std::string, TensorMeta>> out;
  for (const InputSpec& spec : program.graph_signature().inputs) {
    if (spec.kind != InputKind::kUserInput) continue;
    for (const Node* node : program.graph().nodes()) {
      if (node->op() == OpCode::kPlaceholder && node->name() == spec.name) {
        const TensorMeta& meta = node->meta().tensor;
        // Named by its key, as the program's module takes it (the placeholder may be named
        // otherwise, as a weight's placeholder can be named like a key).
        if (!meta.dtype || !meta.shape) {
          fail<Error>("input '{}' has no recorded dtype and shape; give it with --input {}=FILE",
                      spec.target, spec.target);
        }
        out.emplace_back(spec.target, meta);
      }
    }
  }
  return out;
}

at::Tensor draw(const TensorMeta& meta, at::Generator& generator) {
  const c10::ScalarType dtype = *meta.dtype;
  const std::vector<int64_t>& shape = *meta.shape;
  if (dtype == at::kBool) {
    return at::randint(0, 2, shape, generator, at::TensorOptions(at::kLong)).to(at::kBool);
  }
  if (at::isFloatingType(dtype) || at::isComplexType(dtype)) {
    // Half and bfloat16 are drawn in float32 and rounded: the CPU normal kernel lacks them.
    const bool native = dtype == at::kFloat || dtype == at::kDouble || at::isComplexType(dtype);
    const at::Tensor x =
        at::randn(shape, generator, at::TensorOptions(native ? dtype : at::kFloat));
    return x.to(dtype);
  }
  return at::randint(0, 10, shape, generator, at::TensorOptions(dtype));
}

// The tensor `argument` names for input `name`: the file's single tensor or its entry `name`.
at::Tensor read_input(const InputArgument& argument, uint64_t memory_budget) {
  // FileError or ArchiveError, naming the file.
  TensorFileOptions options;
  if (memory_budget > 0) options.memory_budget = memory_budget;
  const TensorFile file = load_tensor_file(argument.file, options);
  if (!file.is_dict) return file.entries.at(0).second;
  std::vector<std::string> keys;
  for (const auto& [key, tensor] : file.entries) {
    if (key == argument.name) return tensor;
    keys.push_back(python_repr(key));
  }
  fail<Error>("--input {}={}: the file holds a dict without the key '{}'; its keys: {}",
              argument.name, argument.file, argument.name,
              keys.empty() ? "none" : fmt::format("{}", fmt::join(keys, ", ")));
}

std::vector<std::string> summary(const at::Tensor& output) {
  const c10::ScalarType dtype = output.scalar_type();
  if (output.numel() == 0 || at::isComplexType(dtype) || dtype == at::kBool) return {"", "", ""};
  const at::Tensor x = output.detach();
  if (at::isFloatingType(dtype)) {
    const at::Tensor wide = x.to(at::kDouble);
    return {table_number(wide.min().item<double>()), table_number(wide.max().item<double>()),
            table_number(wide.mean().item<double>())};
  }
  return {std::to_string(x.min().item<int64_t>()), std::to_string(x.max().item<int64_t>()), ""};
}

}  // namespace

std::string check_input_argument(const std::string& text) {
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == text.size()) {
    return "expected NAME=FILE, got '" + text + "'";
  }
  return "";
}

InputArgument parse_input_argument(const std::string& text) {
  const auto equals = text.find('=');
  return {text.substr(0, equals), text.substr(equals + 1)};
}

std::vector<RunInput> prepare_inputs(const ExportedProgram& program,
                                     const std::vector<InputArgument>& given, uint64_t seed) {
  const auto inputs = user_inputs(program);
  std::vector<std::string> names;
  for (const auto& [name, meta] : inputs) names.push_back(name);
  std::set<std::string> seen;
  for (const InputArgument& argument : given) {
    if (std::find(names.begin(), names.end(), argument.name) == names.end()) {
      fail<Error>("--input {}: the program has no input '{}'; its inputs: {}", argument.name,
                  argument.name, fmt::join(names, ", "));
    }
    if (!seen.insert(argument.name).second) {
      fail<Error>("--input {}: the input is given twice", argument.name);
    }
  }
  // The files first: the batch size (s0) they share is the one the others are drawn at.
  std::map<std::string, std::pair<at::Tensor, std::string>> read;
  std::optional<std::pair<std::string, int64_t>> batch;  // the first given input's s0
  for (const auto& [name, meta] : inputs) {
    for (const InputArgument& argument : given) {
      if (argument.name != name) continue;
      at::Tensor value = read_input(argument, program.memory_budget());
      if (!fits(meta, value)) {
        fail<Error>("--input {}={}: the file's tensor is {} {}; the program expects {} {}{}", name,
                    argument.file, dtype_name(value.scalar_type()), shape_text(value.sizes()),
                    dtype_name(*meta.dtype), expected_shape(meta),
                    meta.batch_dims.empty() ? "" : " (s0: any batch size)");
      }
      for (int64_t dim : meta.batch_dims) {
        const int64_t size = value.size(dim);
        if (!batch) {
          batch = std::make_pair(name, size);
        } else if (batch->second != size) {
          fail<Error>(
              "--input {}={}: its batch size (s0) is {}, and input {}'s is {}; the "
              "inputs share s0",
              name, argument.file, size, batch->first, batch->second);
        }
      }
      read[name] = {value, argument.file};
    }
  }
  // An input not given whose example the archive keeps (a training step's snapshot, saved by
  // tdfx::Watch) is that example, at the batch of the files given, if any.
  for (const InputSpec& spec : program.graph_signature().inputs) {
    const auto example = program.example_inputs().find(spec.name);
    if (spec.kind != InputKind::kUserInput || example == program.example_inputs().end() ||
        read.count(spec.target)) {
      continue;
    }
    for (const auto& [name, meta] : inputs) {
      if (name != spec.target) continue;
      for (int64_t dim : meta.batch_dims) {
        const int64_t size = example->second.size(dim);
        if (batch && batch->second != size) {
          fail<Error>(
              "input {}: the archive's example has batch size (s0) {}, and input {}'s is {}; "
              "give {} with --input too",
              name, size, batch->first, batch->second, name);
        }
        if (!batch) batch = std::make_pair(name, size);
      }
      read[name] = {example->second, "the archive's example"};
    }
  }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<RunInput> out;
  for (const auto& [name, meta] : inputs) {
    TensorMeta drawn = meta;
    if (batch) {
      for (int64_t dim : meta.batch_dims) (*drawn.shape)[static_cast<size_t>(dim)] = batch->second;
    }
    // What drawing it would take, before it is drawn: the shape comes from the file.
    if (program.memory_budget() > 0 && !read.count(name)) {
      uint64_t bytes = c10::elementSize(*drawn.dtype);
      for (int64_t size : *drawn.shape) {
        const auto n = static_cast<uint64_t>(std::max<int64_t>(size, 0));
        bytes = n == 0 ? 0 : (bytes > UINT64_MAX / n ? UINT64_MAX : bytes * n);
      }
      if (bytes > program.memory_budget()) {
        fail<Error>(
            "input '{}' would be drawn as {} {}, which takes {}, more than {} ({}); give it "
            "with --input {}=FILE",
            name, dtype_name(*drawn.dtype), shape_text(*drawn.shape), bytes_text(bytes),
            kProgramBudget, bytes_text(program.memory_budget()), name);
      }
    }
    at::Tensor value = draw(drawn, generator);
    std::string source = fmt::format("random (seed {})", seed);
    auto file = read.find(name);
    if (file != read.end()) std::tie(value, source) = file->second;
    out.push_back({name, value, source});
  }
  return out;
}

void print_run(const ExportedProgram& program, const std::vector<RunInput>& inputs,
               std::ostream& out, size_t width) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  Table in_table({{"input", kNameWidth},
                  {"dtype", kDtypeWidth},
                  {"shape", kShapeWidth},
                  {"source", 0, false, true}},
                 width);
  for (const RunInput& input : inputs) {
    named.emplace_back(input.name, input.value);
    in_table.add_row({input.name, dtype_name(input.value.scalar_type()),
                      shape_text(input.value.sizes()), input.source});
  }
  const std::vector<at::Tensor> outputs = program.module()(named);

  Table out_table({{"output", 0},
                   {"dtype", kDtypeWidth},
                   {"shape", kShapeWidth},
                   {"min", kNumberWidth, true},
                   {"max", kNumberWidth, true},
                   {"mean", kNumberWidth, true}},
                  width);
  const auto& specs = program.graph_signature().outputs;
  for (size_t i = 0; i < outputs.size() && i < specs.size(); ++i) {
    std::vector<std::string> row{specs[i].key.repr(), dtype_name(outputs[i].scalar_type()),
                                 shape_text(outputs[i].sizes())};
    for (std::string& cell : summary(outputs[i])) row.push_back(std::move(cell));
    out_table.add_row(std::move(row));
  }
  in_table.print(out);
  out << "\n";
  out_table.print(out);
}

namespace {

std::vector<at::Tensor> tensors_of(const std::vector<RunInput>& inputs) {
  std::vector<at::Tensor> out;
  for (const RunInput& input : inputs) out.push_back(input.value);
  return out;
}

// The run's inputs and outputs in one tensor file, for another tool (Python) to compare with:
// inputs by name, outputs by key joined with "_" (as --loss names them).
void save_run(const ExportedProgram& program, const std::vector<RunInput>& inputs,
              const std::string& path) {
  TensorEntries entries;
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const RunInput& input : inputs) {
    entries.emplace_back("input:" + input.name, input.value);
    named.emplace_back(input.name, input.value);
  }
  const std::vector<at::Tensor> outputs = program.module()(named);
  const auto& specs = program.graph_signature().outputs;
  for (size_t i = 0; i < outputs.size() && i < specs.size(); ++i) {
    entries.emplace_back("output:" + specs[i].key.joined("_"), outputs[i]);
  }
  writing(path, [&] { save_tensor_file(entries, path); });
}

// Wider than the input and output tables: eleven columns, most of them numbers.
constexpr size_t kReportWidth = 100;

// The terminal's width from `COLUMNS` when it holds a sensible number, else 0.
size_t terminal_columns() {
  const char* text = std::getenv("COLUMNS");
  if (text == nullptr) return 0;
  char* end = nullptr;
  const unsigned long columns = std::strtoul(text, &end, 10);
  if (end == text || *end != '\0' || columns < kMinTableWidth || columns > kMaxTableWidth) {
    return 0;
  }
  return columns;
}

}  // namespace

bool run_program(const std::string& path, const std::vector<InputArgument>& given, uint64_t seed,
                 const RunReports& reports) {
  bool nonfinite = false;
  if (!reports.save.empty() && reports.save == reports.overlay) {
    fail<Error>("--save and -o name the same file, {}: give them different files", reports.save);
  }
  const size_t width = reports.width > 0 ? reports.width : terminal_columns();
  const size_t report_width = width > 0 ? width : kReportWidth;
  LoadOptions load_options;
  if (reports.memory_budget > 0) load_options.memory_budget = reports.memory_budget;
  if (reports.time_budget > 0) load_options.time_budget = reports.time_budget;
  const ExportedProgram program = load(path, load_options);
  // Everything below, the inputs drawn and every report's runs, within the program's budgets.
  const ScopedMemoryBudget budget(program.memory_budget(), kProgramBudget);
  const ScopedTimeBudget time(program.time_budget(), kProgramTimeBudget);
  const std::vector<RunInput> inputs = prepare_inputs(program, given, seed);
  // Every pass below — the outputs printed, those saved, each report's — starts from the
  // program's buffers and the generator as loaded: a layer in training mode changes nothing
  // for the next, and a Dropout draws the same mask in each (DebugRun).
  const Debuggee run = debuggee(program, tensors_of(inputs));
  {
    const DebugRun pass(run);
    print_run(program, inputs, std::cout, width > 0 ? width : kTerminalWidth);
  }
  if (!reports.save.empty()) {
    const DebugRun pass(run);
    save_run(program, inputs, reports.save);
  }
  std::map<std::string, NodeOverlay> overlay, module_overlay;
  // A page holds each report as a layer of its own, to switch between.
  std::vector<OverlayLayer> layers;
  std::optional<std::vector<NodeStats>> stats;
  if (reports.stats) {
    stats = node_stats(run);
    std::cout << "\nstatistics per node:\n" << stats_table(*stats, report_width).str();
    overlay = stats_overlay(*stats);
  }
  if (reports.profile) {
    const Profile p = profile(run, reports.repeats);
    std::cout << fmt::format("\ntime per node (median of {} runs; total {:.1f} µs):\n", p.repeats,
                             p.total_us)
              << p.node_table(report_width).str() << "\ntime per module:\n"
              << p.module_table(report_width).str();
    layers.push_back(profile_layer(p));
    // Time colours the nodes; statistics, when asked for too, stay as rows.
    for (auto& [name, o] : profile_overlay(p)) {
      NodeOverlay& target = overlay[name];
      target.fill = o.fill;
      target.lines.insert(target.lines.begin(), o.lines.begin(), o.lines.end());
    }
  }
  if (reports.find_nonfinite) {
    const auto found = first_nonfinite(run);
    std::cout << "\n" << (found ? found->str() : "every node's values are finite\n");
    if (found) mark_nonfinite(overlay, *found);
    nonfinite |= found.has_value();
    if (stats || found)
      layers.insert(layers.begin(), stats_layer(stats ? *stats : std::vector<NodeStats>{}, found));
  } else if (stats) {
    layers.insert(layers.begin(), stats_layer(*stats));
  }
  if (reports.backward) {
    const Loss loss = reports.loss == "sum" ? Loss::sum() : Loss::output(reports.loss);
    if (reports.grad_stats || !reports.find_nonfinite_grad || !reports.overlay.empty()) {
      const GradReport grads = grad_stats(run, loss);
      std::cout << fmt::format("\nbackward from the {}: loss {}\n", grads.loss_name,
                               table_number(grads.loss));
      if (reports.grad_stats) {
        std::cout << "\ngradient per node (backward order):\n"
                  << grad_table(grads, report_width).str() << "\ngradient per parameter:\n"
                  << parameter_grad_table(grads, report_width).str()
                  << "\ngradient flow per module:\n"
                  << flow_table(grads.flow, report_width).str();
      }
      // Gradients colour the nodes; forward statistics and times, when asked for too, stay
      // as rows.
      for (auto& [name, o] : grad_overlay(grads)) {
        NodeOverlay& target = overlay[name];
        target.fill = o.fill;
        target.marked |= o.marked;
        target.lines.insert(target.lines.end(), o.lines.begin(), o.lines.end());
      }
      module_overlay = flow_overlay(grads.flow);
      layers.push_back(grad_layer(grads));
    }
    if (reports.find_nonfinite_grad) {
      const auto found = first_nonfinite_grad(run, loss);
      std::cout << "\n"
                << (found ? found->str() : "every node's and parameter's gradient is finite\n");
      nonfinite |= found.has_value();
    }
  }
  if (!reports.overlay.empty()) {
    RenderOptions options = program_render_options(program, kDefaultMaxNodes);
    if (format_from_extension(reports.overlay) == Format::kHtml) {
      options.layers = std::move(layers);  // the drawings plain, the layers switched in the page
    } else {
      options.overlay = std::move(overlay);
      options.module_overlay = std::move(module_overlay);
    }
    options.view = reports.view;
    writing(reports.overlay, [&] { save_diagram(program.graph(), reports.overlay, options); });
  }
  return nonfinite;
}

}  // namespace tdfx::cli
