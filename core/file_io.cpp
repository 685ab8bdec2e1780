#include "tdfx/core/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "tdfx/core/error.h"

namespace tdfx {
namespace {

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Creates a new temporary file beside the target. The name is short (not the
// target's name plus a suffix) so that a target name of the maximal legal
// length still works.
int create_temporary(const std::string& folder, std::string& temporary) {
  std::random_device random;
  for (int attempt = 0; attempt < 16; ++attempt) {
    temporary = fmt::format("{}/.tdfx-{:08x}{:08x}.tmp", folder, random(), random());
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

// What `mode` is, for a refusal: the rename would replace it with a regular file.
const char* not_regular(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  // The rename replaces whatever `path` names: only a regular file, or nothing, may be
  // replaced (a device, a FIFO or a symbolic link would be lost, not written).
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode)) {
    throw FileError(path, fmt::format("cannot write the file: it is {}, not a regular file",
                                      not_regular(existing.st_mode)));
  }
  std::string temporary;
  const int fd = create_temporary(folder_of(path), temporary);
  if (fd < 0) throw FileError(path, fmt::format("cannot write the file: {}", std::strerror(errno)));
  bool ok = write_all(fd, bytes) && ::fsync(fd) == 0;
  int error = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && std::rename(temporary.c_str(), path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    ::unlink(temporary.c_str());
    throw FileError(path, fmt::format("cannot write the file: {}", std::strerror(error)));
  }
}

RegularFile RegularFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw FileError(path, fmt::format("cannot open the file: {}", std::strerror(errno)));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    throw FileError(path, fmt::format("cannot read the file: {}", std::strerror(error)));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(info.st_mode)    ? "a directory"
                       : S_ISFIFO(info.st_mode) ? "a FIFO"
                       : S_ISSOCK(info.st_mode) ? "a socket"
                                                : "a device";
    throw FileError(path, fmt::format("is {}, not a regular file", kind));
  }
  return RegularFile(fd, static_cast<uint64_t>(info.st_size), path);
}

RegularFile::RegularFile(int fd, uint64_t size, std::string path)
    : fd_(fd), size_(size), path_(std::move(path)) {}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : fd_(other.fd_), size_(other.size_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tdfx
