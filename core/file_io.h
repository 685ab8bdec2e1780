#pragma once

/// \file
/// Reading and writing whole files safely. Every file tdfx writes (archives,
/// TorchScript modules, drawings) goes through write_file_atomically; every
/// file it reads from a user goes through RegularFile::open. Both throw FileError, which
/// keeps the path apart from the problem; what a file holds is its reader's business
/// (ArchiveError).

#include <cstdint>
#include <string>
#include <string_view>

namespace tdfx {

/// Writes `bytes` to `path` so that readers see either the old file or the
/// whole new one: a temporary file with a short name in the same folder is
/// written, flushed to disk and renamed over `path`. The new file's mode is
/// 0666 less the process umask, as for any file a program creates. On any
/// failure (disk full, file-size limit, no permission) throws FileError naming the
/// path and the system's reason; the temporary is removed and an existing
/// file at `path` is left as it was. Only a regular file is replaced: a path
/// naming a symbolic link, device, FIFO, socket or directory is refused.
void write_file_atomically(const std::string& path, std::string_view bytes);

/// A read-only file descriptor on a regular file, closed on destruction.
/// Opening refuses directories, FIFOs, sockets and devices (which could block
/// forever or never end) with a FileError naming the path; a file that cannot be
/// opened gives the system's reason (`No such file or directory`).
class RegularFile {
 public:
  /// Opens `path` for reading, as the class comment says; FileError naming it when it cannot.
  static RegularFile open(const std::string& path);
  /// Takes `other`'s descriptor; `other` then closes nothing.
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&&) = delete;
  RegularFile(const RegularFile&) = delete;
  ~RegularFile();

  /// The open file descriptor.
  int fd() const { return fd_; }
  /// The file's size when it was opened.
  uint64_t size() const { return size_; }
  /// The path it was opened at.
  const std::string& path() const { return path_; }

 private:
  RegularFile(int fd, uint64_t size, std::string path);
  int fd_;
  uint64_t size_;
  std::string path_;
};

}  // namespace tdfx
