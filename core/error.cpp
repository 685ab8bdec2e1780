#include "tdfx/core/error.h"

#include <c10/util/Exception.h>

#include <new>

namespace tdfx {

FileError::FileError(std::string path, std::string problem)
    : Error(path + ": " + problem), path_(std::move(path)), problem_(std::move(problem)) {}

std::string library_message(const std::exception& error) {
  if (dynamic_cast<const std::bad_alloc*>(&error)) return "out of memory";
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  std::string message = c10_error ? c10_error->what_without_backtrace() : error.what();
  const auto tensor = message.find("\nTensor:");
  if (tensor != std::string::npos) message = message.substr(0, tensor) + " (tensor values omitted)";
  // At most a few lines: the first ones say what went wrong.
  size_t at = 0;
  for (int line = 0; line < 8 && at != std::string::npos; ++line) {
    at = message.find('\n', at == 0 ? 0 : at + 1);
  }
  if (at != std::string::npos) message = message.substr(0, at) + "\n...";
  return message;
}

}  // namespace tdfx
