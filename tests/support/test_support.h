#pragma once
// Helpers shared by the tests: the reference texts in tests/golden/ and
// running a command (a sample, the tdfx tool, Python) to capture its output.

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tdfx::testing {

/// The paths this build was configured with (the generated <build>/generated/test_paths.cpp).
extern const char* const kConfiguredSourceDir;
extern const char* const kConfiguredBinDir;

/// The repository root: $TDFX_SOURCE_DIR (set by CTest) or the configured path.
inline std::string source_dir() {
  const char* dir = std::getenv("TDFX_SOURCE_DIR");
  return dir ? dir : kConfiguredSourceDir;
}

/// The build's bin folder, where the samples and the tdfx command are: $TDFX_BIN_DIR (set by
/// CTest) or the configured path.
inline std::string bin_dir() {
  const char* dir = std::getenv("TDFX_BIN_DIR");
  return dir ? dir : kConfiguredBinDir;
}

/// The whole file at `path`; throws when it cannot be read.
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A reference text from tests/golden/.
inline std::string golden(const std::string& name) {
  return read_text(source_dir() + "/tests/golden/" + name);
}

/// A new folder of its own under the system's temporary folder (`<stem>_XXXXXX`), removed with
/// everything in it when the guard goes: a test that writes files writes them here, so it can run
/// alone or in any order.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& stem) {
    std::string pattern = (std::filesystem::temp_directory_path() / (stem + "_XXXXXX")).string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("cannot create " + pattern);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;  // a destructor must not throw; a leftover folder is harmless
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// `path() / name`.
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// What a command printed and how it exited.
struct CommandResult {
  int status;  // the exit code, or -1 when killed by a signal
  std::string out;
};

/// Runs `command` through the shell; returns its stdout (redirect stderr in
/// the command to capture it too) and exit code.
inline CommandResult run_command(const std::string& command) {
  CommandResult result{-1, ""};
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int raw = pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return result;
}

/// Sections of a script's output, by the name after each `=== ` marker line.
inline std::map<std::string, std::string> sections(const std::string& text) {
  std::map<std::string, std::string> out;
  std::string current;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    if (line.rfind("=== ", 0) == 0) {
      current = line.substr(4);
      out[current];
    } else if (!current.empty()) {
      out[current] += line + "\n";
    }
    pos = end + 1;
  }
  for (auto& [name, body] : out) {
    if (!body.empty()) body.pop_back();  // print()'s newline
  }
  return out;
}

}  // namespace tdfx::testing
