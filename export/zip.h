#pragma once

/// \file
/// The zip container of `.pt2` archives, written and read by tdfx itself.
/// Records are stored uncompressed (method 0), so Python's `zipfile` reads
/// them, and a reader needs no inflater: compressed, encrypted, split or
/// zip64 files are refused. The reader checks every offset, size and CRC
/// against the file before it hands out a byte, and never allocates more
/// than the caller's cap for one record.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tdfx/core/file_io.h"

namespace tdfx::detail {

/// Builds a stored-only zip in memory. Entries keep their insertion order;
/// the bytes are deterministic (fixed timestamps).
class ZipWriter {
 public:
  /// Adds one record. ArchiveError when the archive would pass 4 GiB (zip64
  /// is not written) or a name repeats.
  void add(const std::string& name, std::string_view data);
  /// The finished archive.
  std::string finish();

 private:
  struct Entry {
    std::string name;
    uint32_t crc;
    uint32_t size;
    uint32_t offset;
  };
  std::string out_;
  std::vector<Entry> entries_;
};

/// Random access to the bytes of an archive (a file, a stream or memory).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  /// Reads exactly `n` bytes at `offset` into `out`; ArchiveError on failure.
  virtual void read_at(uint64_t offset, char* out, size_t n) const = 0;
};

/// A ByteSource over a regular file, read with pread; a short read is an
/// ArchiveError naming the file.
class FileSource : public ByteSource {
 public:
  explicit FileSource(const RegularFile& file) : file_(file) {}
  uint64_t size() const override;
  void read_at(uint64_t offset, char* out, size_t n) const override;

 private:
  const RegularFile& file_;
};

/// A ByteSource over bytes already in memory (tests, fuzzers).
class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  void read_at(uint64_t offset, char* out, size_t n) const override;

 private:
  std::string_view bytes_;
};

/// What a ZipReader accepts beyond the records ZipWriter writes.
struct ZipReadOptions {
  /// Records followed by a data descriptor (flag bit 3), as PyTorch's stream
  /// writer (`torch.save`) writes them. The central directory's sizes and CRC
  /// are the ones checked; the descriptor's bytes are never read.
  bool allow_data_descriptors = false;
  /// What the file should be, for messages: "not a tdfx archive: ...".
  std::string kind = "tdfx archive";
};

/// The records of a zip written by ZipWriter (or any stored-only zip).
class ZipReader {
 public:
  /// Reads and checks the central directory. `where` prefixes messages.
  /// `inspect_names`, when given, sees the record names before any record is
  /// checked, so that a caller can recognise a foreign layout and say so.
  ZipReader(const ByteSource& source, std::string where,
            const std::function<void(const std::vector<std::string>&)>& inspect_names = {},
            const ZipReadOptions& options = {});

  bool has(const std::string& name) const { return records_.count(name) != 0; }
  /// The declared size of a record (checked against the file already).
  uint64_t size(const std::string& name) const;
  /// The record's bytes, CRC-checked. ArchiveError when it is missing or
  /// larger than `cap` (the message names the cap and `what_cap`, the
  /// setting that raises it).
  std::string read(const std::string& name, uint64_t cap, std::string_view what_cap) const;
  /// Reads a record of exactly `size` bytes straight into `out` (no copy in
  /// between), CRC-checked; ArchiveError when its size differs.
  void read_into(const std::string& name, char* out, uint64_t size) const;
  /// Every record name, in file order.
  std::vector<std::string> names() const;

 private:
  struct Record {
    uint64_t data_offset;
    uint32_t size;
    uint32_t crc;
    size_t order;
  };
  const ByteSource& source_;
  std::string where_;
  std::map<std::string, Record> records_;
};

/// The CRC-32 of zip files (and of zlib).
uint32_t crc32(std::string_view data);

}  // namespace tdfx::detail
