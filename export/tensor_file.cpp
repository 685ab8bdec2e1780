#include "tdfx/export/tensor_file.h"

#include <ATen/ATen.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/file_io.h"
#include "tdfx/core/memory_budget.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/export/tensor_pickle.h"
#include "tdfx/export/zip.h"

namespace tdfx {
namespace {

// Records torch.save writes besides data.pkl and data/KEY; newer versions add
// the last three. Each is small and checked or ignored, never executed.
constexpr const char* kVersionRecord = "version";
constexpr const char* kByteOrderRecord = "byteorder";
constexpr const char* kIgnoredRecords[] = {".data/version", ".data/serialization_id"};
constexpr uint64_t kMaxSmallRecord = 64;

std::string quoted(const std::string& name) { return python_repr(name); }

// The folder every record lives in (`archive/` for a buffer, the file's stem for
// a path), from the one record named FOLDER/data.pkl.
std::string folder_of(const std::vector<std::string>& names, const std::string& where) {
  std::string folder;
  for (const std::string& name : names) {
    const auto slash = name.find('/');
    if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (!folder.empty()) fail<ArchiveError>("{}: two data.pkl records", where);
      folder = name.substr(0, slash + 1);
    }
  }
  return folder;
}

// Says what a zip that is not a tensor file is, when it is something tdfx knows.
void recognise_foreign(const std::vector<std::string>& names, const std::string& where) {
  const auto has = [&](const auto& pred) { return std::any_of(names.begin(), names.end(), pred); };
  if (has([](const std::string& n) { return n == "program.json"; })) {
    fail<ArchiveError>("{}: this is a tdfx program archive (.pt2), not a tensor file (torch.save)",
                       where);
  }
  if (has([](const std::string& n) {
        return n.find("/constants.pkl") != std::string::npos ||
               n.find("/code/") != std::string::npos;
      })) {
    fail<ArchiveError>(
        "{}: this is a TorchScript module (torch.jit.save), not a tensor file (torch.save)", where);
  }
}

void check_version(const detail::ZipReader& zip, const std::string& record,
                   const std::string& where) {
  if (!zip.has(record)) fail<ArchiveError>("{}: no record {}", where, quoted(record));
  const std::string text = zip.read(record, kMaxSmallRecord, "a version record is a number");
  if (text != "1\n" && text != "2\n" && text != "3\n") {
    fail<ArchiveError>("{}: record {} holds {}, not a format version this reader knows (1-3)",
                       where, quoted(record), quoted(text));
  }
}

// Loads each storage record once, checked against its declared size and the budget first.
class StorageRecords {
 public:
  StorageRecords(const detail::ZipReader& zip, std::string folder, std::string where,
                 uint64_t budget)
      : zip_(zip), folder_(std::move(folder)), where_(std::move(where)), budget_(budget) {}

  at::Tensor load(const detail::StorageRequest& request) {
    const std::string record = folder_ + "data/" + request.key;
    auto it = loaded_.find(request.key);
    if (it != loaded_.end()) {
      if (it->second.scalar_type() != request.dtype || it->second.numel() != request.numel) {
        fail<ArchiveError>("{}: storage {} is declared twice with different types or sizes", where_,
                           quoted(record));
      }
      return it->second;
    }
    if (!zip_.has(record)) {
      fail<ArchiveError>("{}: the pickle names storage {}, which has no record", where_,
                         quoted(record));
    }
    const uint64_t itemsize = c10::elementSize(request.dtype);
    const auto numel = static_cast<uint64_t>(request.numel);
    if (numel > budget_ / itemsize) {
      fail<ArchiveError>(
          "{}: storage {} declares {} {} elements, more than the memory budget of {} bytes "
          "(TensorFileOptions::memory_budget)",
          where_, quoted(record), request.numel, dtype_name(request.dtype), budget_);
    }
    if (zip_.size(record) != numel * itemsize) {
      fail<ArchiveError>("{}: storage {} of {} {} elements needs {} bytes; its record holds {}",
                         where_, quoted(record), request.numel, dtype_name(request.dtype),
                         numel * itemsize, zip_.size(record));
    }
    total_ += numel * itemsize;
    if (total_ > budget_) {
      fail<ArchiveError>(
          "{}: the storages need more than the memory budget of {} bytes "
          "(TensorFileOptions::memory_budget)",
          where_, budget_);
    }
    at::Tensor data = at::empty({request.numel}, at::TensorOptions().dtype(request.dtype));
    if (numel > 0) zip_.read_into(record, static_cast<char*>(data.data_ptr()), numel * itemsize);
    if (request.dtype == c10::ScalarType::Bool) {
      const auto* bytes = static_cast<const unsigned char*>(data.data_ptr());
      if (std::any_of(bytes, bytes + numel, [](unsigned char b) { return b > 1; })) {
        fail<ArchiveError>("{}: bool storage {} holds bytes other than 0 and 1", where_,
                           quoted(record));
      }
    }
    loaded_.emplace(request.key, data);
    return data;
  }

  /// The record names of the storages loaded so far.
  std::set<std::string> records() const {
    std::set<std::string> out;
    for (const auto& [key, data] : loaded_) out.insert(folder_ + "data/" + key);
    return out;
  }

 private:
  const detail::ZipReader& zip_;
  std::string folder_;
  std::string where_;
  uint64_t budget_;
  uint64_t total_ = 0;
  std::map<std::string, at::Tensor> loaded_;
};

TensorFile read_tensor_file(const detail::ByteSource& source, const std::string& where,
                            const TensorFileOptions& options) {
  // A pickle at the start: torch.save's format before the zip one.
  char first = 0;
  if (source.size() > 0) source.read_at(0, &first, 1);
  if (static_cast<unsigned char>(first) == 0x80) {
    fail<ArchiveError>(
        "{}: this is torch.save's legacy format (_use_new_zipfile_serialization=False), which "
        "is not read; save it again with torch.save's default format",
        where);
  }
  std::string folder;
  detail::ZipReadOptions zip_options;
  zip_options.allow_data_descriptors = true;
  zip_options.kind = "tensor file";
  const detail::ZipReader zip(
      source, where,
      [&](const std::vector<std::string>& names) {
        recognise_foreign(names, where);
        folder = folder_of(names, where);
        if (folder.empty()) {
          fail<ArchiveError>("{}: not a tensor file (no record FOLDER/data.pkl)", where);
        }
      },
      zip_options);
  check_version(zip, folder + kVersionRecord, where);
  if (zip.has(folder + kByteOrderRecord) && zip.read(folder + kByteOrderRecord, kMaxSmallRecord,
                                                     "a byte order record is a word") != "little") {
    fail<ArchiveError>("{}: the tensors are big-endian; this reader reads little-endian files",
                       where);
  }
  const std::string pickle_record = folder + "data.pkl";
  const std::string pickle =
      zip.read(pickle_record, options.max_pickle_bytes, "TensorFileOptions::max_pickle_bytes");
  StorageRecords storages(zip, folder, where, options.memory_budget);
  TensorFile file = detail::read_tensor_pickle(
      pickle, [&](const detail::StorageRequest& r) { return storages.load(r); },
      where + ": " + quoted(pickle_record));
  // Nothing in the file goes unread: a record the pickle does not name is refused.
  std::set<std::string> known = storages.records();
  known.insert({pickle_record, folder + kVersionRecord, folder + kByteOrderRecord});
  for (const char* ignored : kIgnoredRecords) known.insert(folder + ignored);
  for (const std::string& name : zip.names()) {
    if (!known.count(name)) {
      fail<ArchiveError>("{}: record {} is not part of the tensor file", where, quoted(name));
    }
  }
  // A view's logical size, not its storage's, is what a program that reads it may have to
  // hold: three floats with sizes (1e8, 3) and stride 0 become 1.2 GB once made contiguous.
  for (const auto& [name, tensor] : file.entries) {
    const uint64_t logical = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
    if (logical > options.memory_budget) {
      fail<ArchiveError>(
          "{}: tensor {}({} [{}]{}) takes {} laid out, more than the memory budget of {} "
          "(TensorFileOptions::memory_budget)",
          where, name.empty() ? std::string() : quoted(name) + " ",
          dtype_name(tensor.scalar_type()), fmt::join(tensor.sizes(), ", "),
          tensor.is_contiguous() ? "" : ", a view of a smaller storage", bytes_text(logical),
          bytes_text(options.memory_budget));
    }
  }
  return file;
}

// Reads with `fn`: a bug (InternalError) and the reader's own refusals pass; a file that could
// not be read (FileError) is not a bad file; anything else the reading met (LibTorch's error,
// an allocation that failed, another tdfx error) is a bad file.
template <typename Fn>
TensorFile guarded(const std::string& where, Fn&& fn) {
  return rethrow_as<ArchiveError, ArchiveError, FileError>(where + ": cannot read the tensor file",
                                                           std::forward<Fn>(fn));
}

// A tensor as it will be written: dense, on the CPU, contiguous, of a dtype with a storage class.
at::Tensor storable(const at::Tensor& tensor, const std::string& name) {
  const std::string what = name.empty() ? "the tensor" : "tensor " + quoted(name);
  if (!tensor.defined()) fail<ArchiveError>("{} is undefined", what);
  if (tensor.layout() != at::kStrided || !tensor.device().is_cpu()) {
    fail<ArchiveError>("{} is not a dense CPU tensor", what);
  }
  if (detail::storage_class(tensor.scalar_type()).empty()) {
    fail<ArchiveError>("{} has dtype {}, which tensor files do not store", what,
                       dtype_name(tensor.scalar_type()));
  }
  at::Tensor out = tensor.detach().contiguous();
  out.set_requires_grad(tensor.requires_grad());
  return out;
}

}  // namespace

TensorFile load_tensor_file(const std::string& path, const TensorFileOptions& options) {
  const RegularFile file = RegularFile::open(path);
  const detail::FileSource source(file);
  return guarded(path, [&] { return read_tensor_file(source, path, options); });
}

TensorFile load_tensor_file_bytes(std::string_view bytes, const std::string& name,
                                  const TensorFileOptions& options) {
  return guarded(name, [&] {
    const detail::MemorySource source(bytes);
    return read_tensor_file(source, name, options);
  });
}

std::string tensor_file_bytes(const TensorFile& file, const std::string& archive) {
  if (!file.is_dict && file.entries.size() != 1) {
    fail<ArchiveError>("a single-tensor file holds one tensor, not {}", file.entries.size());
  }
  TensorFile stored{file.is_dict, {}};
  std::set<std::string> names;
  for (const auto& [name, tensor] : file.entries) {
    if (file.is_dict && !names.insert(name).second) {
      fail<ArchiveError>("tensor {} is given twice", quoted(name));
    }
    stored.entries.emplace_back(name, storable(tensor, name));
  }
  detail::ZipWriter zip;
  // data.pkl first: PyTorch's reader takes the folder from the first record.
  zip.add(archive + "/data.pkl", detail::write_tensor_pickle(stored));
  for (size_t i = 0; i < stored.entries.size(); ++i) {
    const at::Tensor& tensor = stored.entries[i].second;
    zip.add(archive + "/data/" + std::to_string(i),
            std::string_view(static_cast<const char*>(tensor.data_ptr()), tensor.nbytes()));
  }
  zip.add(archive + "/" + kVersionRecord, "3\n");
  return zip.finish();
}

namespace {

// The values of `tensors` written as one file: detached, so that none is saved requiring grad.
void save_tensor_entries(bool is_dict, const TensorEntries& tensors, const std::string& path) {
  TensorFile file{is_dict, {}};
  for (const auto& [name, tensor] : tensors) {
    file.entries.emplace_back(name, tensor.defined() ? tensor.detach() : tensor);
  }
  std::string bytes;
  try {
    bytes = tensor_file_bytes(file);
  } catch (const ArchiveError& e) {
    fail<ArchiveError>("{}: cannot save: {}", path, e.what());
  }
  write_file_atomically(path, bytes);
}

}  // namespace

void save_tensor_file(const at::Tensor& tensor, const std::string& path) {
  save_tensor_entries(false, {{"", tensor}}, path);
}

void save_tensor_file(const TensorEntries& tensors, const std::string& path) {
  save_tensor_entries(true, tensors, path);
}

}  // namespace tdfx
