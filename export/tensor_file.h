#pragma once

/// \file
/// Tensor files as Python's `torch.save` writes them (torch 1.13's default
/// zip format), read and written by tdfx's own code:
///
///     NAME/data.pkl    a pickle (protocol 2) of one tensor, or of a dict of
///                      str -> tensor (`torch.save({"x": t, "mask": m}, f)`)
///     NAME/data/0 ...  each storage's raw bytes, little-endian
///     NAME/version     "3\n"
///
/// A tensor file is as untrusted as an archive: the zip is read by the
/// archive's reader (stored records, sizes checked before reading, CRC), and
/// the pickle by a small restricted reader that accepts only the opcodes
/// torch.save emits for these values and only three kinds of global
/// (`torch._utils._rebuild_tensor_v2`, `collections.OrderedDict` and the
/// `torch.*Storage` dtype classes). Every size, stride and offset is checked
/// against its storage, and every storage against its record, before any
/// tensor exists. Anything else is an ArchiveError naming what was found.
///
///     torch.save({"x": torch.randn(2, 3)}, "in.pt")           # Python
///     TensorFile file = load_tensor_file("in.pt");             // C++
///     file.entries[0]  // {"x", f32[2, 3]}, bit for bit

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tdfx {

/// Named tensors in file order.
using TensorEntries = std::vector<std::pair<std::string, at::Tensor>>;

/// What a tensor file holds.
struct TensorFile {
  /// False for a file holding one tensor: `entries` then has one entry named "".
  bool is_dict = false;
  /// The tensors, each with its name (the dict's key), in the file's order.
  TensorEntries entries;
};

/// Bounds on what loading a tensor file may cost.
struct TensorFileOptions {
  /// The largest data.pkl accepted, in bytes.
  uint64_t max_pickle_bytes = uint64_t{64} << 20;
  /// The most memory all storages together may ask for, in bytes.
  uint64_t memory_budget = uint64_t{4} << 30;
};

/// Reads a file written by `torch.save(tensor, path)` or
/// `torch.save({"name": tensor, ...}, path)` (or by save_tensor_file). Views
/// load as views: tensors sharing a storage in Python share it here, with the
/// same offsets and strides. A missing, unreadable or non-regular file is a FileError; a
/// truncated, corrupt, foreign, over-budget or malicious one an ArchiveError naming the file
/// and the problem; it never crashes and never runs code.
TensorFile load_tensor_file(const std::string& path, const TensorFileOptions& options = {});

/// load_tensor_file() from the file's bytes in memory; `name` is used in messages.
TensorFile load_tensor_file_bytes(std::string_view bytes, const std::string& name = "<memory>",
                                  const TensorFileOptions& options = {});

/// The bytes of a tensor file holding `file` (one tensor when `is_dict` is
/// false), as torch.save lays them out under the folder `archive`. Each tensor
/// gets a contiguous storage of its own (views are saved as their values).
/// ArchiveError for a tensor that is not a dense CPU tensor of a dtype torch
/// names a storage for, for a repeated name, and for a single-tensor file
/// whose entry count is not one.
std::string tensor_file_bytes(const TensorFile& file, const std::string& archive = "archive");

/// Writes `tensor` so that Python's `torch.load(path)` returns its value (without
/// requires_grad, so that `.numpy()` works on it); atomic (see write_file_atomically). A tensor
/// that cannot be stored is an ArchiveError, a file that cannot be written a FileError, both naming
/// the path.
void save_tensor_file(const at::Tensor& tensor, const std::string& path);

/// Writes `tensors` so that Python's `torch.load(path)` returns a dict of their values in
/// this order (without requires_grad); atomic. ArchiveError for repeated names.
void save_tensor_file(const TensorEntries& tensors, const std::string& path);

}  // namespace tdfx
