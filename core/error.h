#pragma once

/// \file
/// The exceptions tdfx throws. Every failure a user can cause is a tdfx::Error
/// (or one of its subtypes) whose message names the key, node or module
/// involved and what was expected. Internal invariant violations are
/// tdfx::InternalError: a bug in tdfx, never the user's input.

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace tdfx {

/// Base of every error a user can cause.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A key that is missing, malformed or of the wrong kind (tensor vs TensorDict).
class KeyError : public Error {
 public:
  using Error::Error;
};

/// A tensor whose shape or dtype does not fit (batch size, arity of inputs/outputs).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A module that cannot be traced, or a failure while tracing.
class TraceError : public Error {
 public:
  using Error::Error;
};

/// A graph that is malformed or an invalid graph edit.
class GraphError : public Error {
 public:
  using Error::Error;
};

/// A failure while running a graph; the message names the node being executed.
class RunError : public Error {
 public:
  using Error::Error;
};

/// A file that cannot be opened, read or written (missing, no permission, not a regular
/// file, disk full). `path()` names the file and `problem()` says what went wrong; the
/// message is `PATH: PROBLEM`.
class FileError : public Error {
 public:
  /// The error `PATH: PROBLEM`.
  FileError(std::string path, std::string problem);
  /// The file's path, as given.
  const std::string& path() const { return path_; }
  /// What went wrong with it (`cannot open the file: No such file or directory`).
  const std::string& problem() const { return problem_; }

 private:
  std::string path_;
  std::string problem_;
};

/// A file that cannot be saved or loaded as a tdfx archive or tensor file; the message
/// starts with the file's name.
class ArchiveError : public Error {
 public:
  using Error::Error;
};

/// A broken invariant inside tdfx itself (a bug, not bad input).
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// A LibTorch error's message as tdfx shows it: no C++ backtrace, and no
/// tensor values (LibTorch appends a tensor's whole print to some messages,
/// "Tensor:\n<values>"; a captured Linear's weight would fill a screen).
/// std::bad_alloc's is "out of memory".
std::string library_message(const std::exception& error);

/// The one place exceptions are translated. Runs `fn` and returns what it returns. An
/// exception from it passes as it is when it is an InternalError (a bug in tdfx, never
/// dressed as the user's error) or one of `Kept`; any other (LibTorch's c10::Error,
/// std::bad_alloc, a tdfx error of a kind not kept) becomes an E reading `what: message`
/// (library_message). `what` is a string, or a function that makes it, called only on
/// failure (for a hot path):
///
///     // a file's reader: its own ArchiveError and FileError pass, all else is a bad file
///     return rethrow_as<ArchiveError, ArchiveError, FileError>(
///         path + ": cannot read the archive", [&] { return read_archive(source); });
template <typename E, typename... Kept, typename What, typename Fn>
decltype(auto) rethrow_as(const What& what, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const InternalError&) {
    throw;
  } catch (const std::exception& e) {
    if ((... || (dynamic_cast<const Kept*>(&e) != nullptr))) throw;
    if constexpr (std::is_invocable_v<const What&>) {
      throw E(std::string(what()) + ": " + library_message(e));
    } else {
      throw E(std::string(what) + ": " + library_message(e));
    }
  }
}

/// rethrow_as that keeps every tdfx error: only exceptions from outside tdfx (LibTorch's, the
/// standard library's) become an E.
///
///     rethrow_foreign_as<RunError>("backward from the loss (sum of loc)", [&] { ... });
template <typename E, typename What, typename Fn>
decltype(auto) rethrow_foreign_as(const What& what, Fn&& fn) {
  return rethrow_as<E, Error>(what, std::forward<Fn>(fn));
}

/// Throws E with a message formatted by fmt: `fail<KeyError>("key {} not found", k)`.
template <typename E = Error, typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw E(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tdfx
