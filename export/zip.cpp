#include "tdfx/export/zip.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"

namespace tdfx::detail {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndSize = 22;
constexpr uint16_t kVersion = 20;                       // 2.0: stored records, folders
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: deterministic bytes
// Bounds on what an archive may declare, far above anything tdfx writes.
constexpr size_t kMaxRecords = 1u << 16;
constexpr size_t kMaxDirectoryBytes = 16u << 20;
constexpr size_t kMaxNameBytes = 1024;

void put16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}

void put32(std::string& out, uint32_t v) {
  put16(out, static_cast<uint16_t>(v & 0xffff));
  put16(out, static_cast<uint16_t>(v >> 16));
}

uint16_t get16(const char* p) {
  return static_cast<uint16_t>(static_cast<unsigned char>(p[0]) |
                               (static_cast<unsigned char>(p[1]) << 8));
}

uint32_t get32(const char* p) {
  return static_cast<uint32_t>(get16(p)) | (static_cast<uint32_t>(get16(p + 2)) << 16);
}

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

}  // namespace

uint32_t crc32(std::string_view data) {
  const auto& table = crc_table();
  uint32_t c = 0xffffffffu;
  for (char byte : data) c = table[(c ^ static_cast<unsigned char>(byte)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

// --- writing -------------------------------------------------------------------

void ZipWriter::add(const std::string& name, std::string_view data) {
  for (const Entry& e : entries_) {
    if (e.name == name) fail<ArchiveError>("archive record '{}' written twice", name);
  }
  const uint64_t end = out_.size() + kLocalHeaderSize + name.size() + data.size();
  if (end > std::numeric_limits<uint32_t>::max() - (1u << 20)) {
    fail<ArchiveError>("the archive would exceed 4 GiB, which tdfx archives do not support");
  }
  Entry entry{name, crc32(data), static_cast<uint32_t>(data.size()),
              static_cast<uint32_t>(out_.size())};
  put32(out_, kLocalHeader);
  put16(out_, kVersion);
  put16(out_, 0);  // flags
  put16(out_, 0);  // stored
  put16(out_, 0);  // time
  put16(out_, kDosDate);
  put32(out_, entry.crc);
  put32(out_, entry.size);
  put32(out_, entry.size);
  put16(out_, static_cast<uint16_t>(name.size()));
  put16(out_, 0);  // extra
  out_ += name;
  out_.append(data.data(), data.size());
  entries_.push_back(std::move(entry));
}

std::string ZipWriter::finish() {
  const auto directory_offset = static_cast<uint32_t>(out_.size());
  for (const Entry& e : entries_) {
    put32(out_, kCentralHeader);
    put16(out_, kVersion);  // made by
    put16(out_, kVersion);  // needed
    put16(out_, 0);
    put16(out_, 0);
    put16(out_, 0);
    put16(out_, kDosDate);
    put32(out_, e.crc);
    put32(out_, e.size);
    put32(out_, e.size);
    put16(out_, static_cast<uint16_t>(e.name.size()));
    put16(out_, 0);  // extra
    put16(out_, 0);  // comment
    put16(out_, 0);  // disk
    put16(out_, 0);  // internal attributes
    put32(out_, 0);  // external attributes
    put32(out_, e.offset);
    out_ += e.name;
  }
  const auto directory_size = static_cast<uint32_t>(out_.size() - directory_offset);
  put32(out_, kEndOfDirectory);
  put16(out_, 0);
  put16(out_, 0);
  put16(out_, static_cast<uint16_t>(entries_.size()));
  put16(out_, static_cast<uint16_t>(entries_.size()));
  put32(out_, directory_size);
  put32(out_, directory_offset);
  put16(out_, 0);
  entries_.clear();
  return std::move(out_);
}

// --- reading -------------------------------------------------------------------

void MemorySource::read_at(uint64_t offset, char* out, size_t n) const {
  if (offset > bytes_.size() || n > bytes_.size() - offset) {
    fail<ArchiveError>("read past the end of the data");
  }
  std::memcpy(out, bytes_.data() + offset, n);
}

uint64_t FileSource::size() const { return file_.size(); }

void FileSource::read_at(uint64_t offset, char* out, size_t n) const {
  while (n > 0) {
    const ssize_t got = ::pread(file_.fd(), out, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      throw FileError(file_.path(), fmt::format("cannot read the file: {}", std::strerror(errno)));
    if (got == 0) {
      fail<ArchiveError>("{}: cannot read the file: it is shorter than its directory says",
                         file_.path());
    }
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

ZipReader::ZipReader(const ByteSource& source, std::string where,
                     const std::function<void(const std::vector<std::string>&)>& inspect_names,
                     const ZipReadOptions& options)
    : source_(source), where_(std::move(where)) {
  const uint64_t file_size = source_.size();
  auto refuse = [&](std::string_view why) {
    fail<ArchiveError>("{}: not a {}: {}", where_, options.kind, why);
  };
  if (file_size < kEndSize) {
    refuse(fmt::format("{} bytes is too small for a zip file", file_size));
  }
  // The end-of-directory record is the last 22 bytes plus a comment of up to 64 KiB.
  const uint64_t tail_size = std::min<uint64_t>(file_size, kEndSize + 0xffff);
  std::string tail(tail_size, '\0');
  source_.read_at(file_size - tail_size, tail.data(), tail.size());
  size_t end = std::string::npos;
  for (size_t i = tail.size() - kEndSize + 1; i-- > 0;) {
    if (get32(tail.data() + i) == kEndOfDirectory &&
        i + kEndSize + get16(tail.data() + i + 20) == tail.size()) {
      end = i;
      break;
    }
  }
  if (end == std::string::npos) refuse("no zip end-of-directory record");
  const char* e = tail.data() + end;
  const uint64_t end_offset = file_size - tail_size + end;
  const uint16_t entries = get16(e + 10);
  const uint32_t directory_size = get32(e + 12);
  const uint32_t directory_offset = get32(e + 16);
  if (get16(e + 4) != 0 || get16(e + 6) != 0 || get16(e + 8) != entries) {
    refuse("split (multi-disk) zip files are not supported");
  }
  if (entries == 0xffff || directory_offset == 0xffffffffu) {
    refuse("zip64 files are not supported");
  }
  if (entries > kMaxRecords || directory_size > kMaxDirectoryBytes ||
      uint64_t{directory_offset} + directory_size > end_offset) {
    refuse("the zip directory lies outside the file");
  }
  std::string directory(directory_size, '\0');
  source_.read_at(directory_offset, directory.data(), directory.size());

  // First the directory alone, so the caller can look at the names before
  // any record is judged.
  struct Entry {
    std::string name;
    uint16_t flags, method;
    uint32_t crc, packed, size, local;
  };
  std::vector<Entry> listed;
  size_t at = 0;
  for (size_t i = 0; i < entries; ++i) {
    if (directory.size() - at < kCentralHeaderSize ||
        get32(directory.data() + at) != kCentralHeader) {
      refuse(fmt::format("zip directory entry {} is malformed", i));
    }
    const char* h = directory.data() + at;
    const size_t name_size = get16(h + 28);
    const size_t skip = name_size + get16(h + 30) + get16(h + 32);
    if (directory.size() - at - kCentralHeaderSize < skip) {
      refuse(fmt::format("zip directory entry {} is malformed", i));
    }
    listed.push_back({std::string(h + kCentralHeaderSize, name_size), get16(h + 8), get16(h + 10),
                      get32(h + 16), get32(h + 20), get32(h + 24), get32(h + 42)});
    at += kCentralHeaderSize + skip;
  }
  if (inspect_names) {
    std::vector<std::string> names;
    for (const Entry& entry : listed) names.push_back(entry.name);
    inspect_names(names);
  }

  std::vector<std::pair<uint64_t, uint64_t>> extents;  // [header, end of data) of each record
  for (size_t i = 0; i < listed.size(); ++i) {
    const auto& [name, flags, method, crc, packed, size, local] = listed[i];
    if (name.empty() || name.size() > kMaxNameBytes) refuse("a record name is empty or too long");
    // Names reach messages: one with a line break could forge a second line.
    if (escape_controls(name) != name) {
      refuse(fmt::format("record {} has a control character in its name", python_repr(name)));
    }
    if (flags & 0x0001) refuse(fmt::format("record '{}' is encrypted", name));
    if (method != 0 || packed != size) {
      refuse(fmt::format("record '{}' is compressed; {}s store records uncompressed", name,
                         options.kind));
    }
    if ((flags & 0x0008) && !options.allow_data_descriptors) {
      refuse(fmt::format("record '{}' uses a data descriptor", name));
    }
    if (uint64_t{local} + kLocalHeaderSize > directory_offset) {
      refuse(fmt::format("record '{}' lies outside the file", name));
    }
    char header[kLocalHeaderSize];
    source_.read_at(local, header, sizeof header);
    const size_t local_name_size = get16(header + 26);
    const uint64_t data_offset =
        uint64_t{local} + kLocalHeaderSize + local_name_size + get16(header + 28);
    if (get32(header) != kLocalHeader || local_name_size != name.size() ||
        data_offset + size > directory_offset) {
      refuse(fmt::format("record '{}' lies outside the file or its header is corrupt", name));
    }
    std::string local_name(name.size(), '\0');
    source_.read_at(uint64_t{local} + kLocalHeaderSize, local_name.data(), name.size());
    if (local_name != name) refuse(fmt::format("record '{}' has two different names", name));
    if (!records_.emplace(name, Record{data_offset, size, crc, i}).second) {
      refuse(fmt::format("record '{}' appears twice", name));
    }
    extents.emplace_back(local, data_offset + size);
  }
  // Records must not share bytes: each byte of the file belongs to one record at most.
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].first < extents[i - 1].second) refuse("two records overlap");
  }
}

uint64_t ZipReader::size(const std::string& name) const {
  auto it = records_.find(name);
  if (it == records_.end()) fail<ArchiveError>("{}: the archive has no record '{}'", where_, name);
  return it->second.size;
}

std::string ZipReader::read(const std::string& name, uint64_t cap,
                            std::string_view what_cap) const {
  auto it = records_.find(name);
  if (it == records_.end()) fail<ArchiveError>("{}: the archive has no record '{}'", where_, name);
  const Record& record = it->second;
  if (record.size > cap) {
    fail<ArchiveError>("{}: record '{}' declares {} bytes, over the limit of {} bytes ({})", where_,
                       name, record.size, cap, what_cap);
  }
  std::string bytes(record.size, '\0');
  source_.read_at(record.data_offset, bytes.data(), bytes.size());
  if (crc32(bytes) != record.crc) {
    fail<ArchiveError>("{}: record '{}' is corrupt (its checksum does not match)", where_, name);
  }
  return bytes;
}

void ZipReader::read_into(const std::string& name, char* out, uint64_t size) const {
  if (this->size(name) != size) {
    fail<ArchiveError>("{}: record '{}' holds {} bytes, not {}", where_, name, this->size(name),
                       size);
  }
  const Record& record = records_.at(name);
  source_.read_at(record.data_offset, out, size);
  if (crc32(std::string_view(out, size)) != record.crc) {
    fail<ArchiveError>("{}: record '{}' is corrupt (its checksum does not match)", where_, name);
  }
}

std::vector<std::string> ZipReader::names() const {
  std::vector<std::string> out(records_.size());
  for (const auto& [name, record] : records_) out[record.order] = name;
  return out;
}

}  // namespace tdfx::detail
