#pragma once

/// \file
/// The pickles inside tensor files (`data.pkl`): a restricted reader that
/// accepts only what torch.save emits for a tensor or a dict of str -> tensor,
/// and the writer of the same. Internal to export/tensor_file.cpp.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "tdfx/export/tensor_file.h"

namespace tdfx::detail {

/// A storage named by a pickle's persistent id
/// `('storage', torch.FloatStorage, key, location, numel)`.
struct StorageRequest {
  std::string key;  // digits only: it names the record data/KEY
  c10::ScalarType dtype;
  int64_t numel;
};

/// Returns the storage `request` names as a 1-d contiguous CPU tensor of
/// `numel` elements, or throws ArchiveError. Called once per persistent id
/// (the same key may be asked for again by a later tensor).
using StorageLoader = std::function<at::Tensor(const StorageRequest&)>;

/// Reads a tensor pickle. `where` prefixes messages. Refuses, with an
/// ArchiveError naming the opcode or global and its byte offset, anything
/// outside protocol 2's opcodes for these values; checks the stack, marks,
/// memo and nesting on every opcode, and each tensor's sizes, strides and
/// offset against its storage before creating it. Never recurses on the
/// file's depth.
TensorFile read_tensor_pickle(std::string_view bytes, const StorageLoader& load_storage,
                              const std::string& where);

/// The storage class torch names for `dtype` (`FloatStorage`), or "" when
/// there is none.
std::string storage_class(c10::ScalarType dtype);

/// The pickle of `file` as torch.save writes it, with tensor i stored
/// contiguously in the storage named `std::to_string(i)`. The tensors must
/// be contiguous CPU tensors of a dtype with a storage class.
std::string write_tensor_pickle(const TensorFile& file);

}  // namespace tdfx::detail
