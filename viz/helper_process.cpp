#include "tdfx/viz/helper_process.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tdfx/core/error.h"

extern char** environ;

// Defined by the source file that the installed package's tdfxConfig.cmake adds to a
// program linking tdfx::viz (cmake/tdfxConfig.cmake.in): the installed helper's path.
extern "C" __attribute__((weak)) const char* tdfx_graphviz_helper_path();

namespace tdfx::detail {
namespace {

constexpr size_t kHeader = 9;

// A socket end closed at scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = sigabbrev_np(signal);
    return fmt::format("killed by signal {} ({})", signal, name ? name : "?");
  }
  return fmt::format("exited with status {} without an answer", WEXITSTATUS(status));
}

// Writes `input` and reads the answer until the child closes its end, or the deadline: false
// then. Writing and reading interleave, so that a child answering early never blocks.
bool exchange(int fd, const std::string& input, std::chrono::steady_clock::time_point deadline,
              std::string& answer) {
  size_t written = 0;
  if (input.empty()) ::shutdown(fd, SHUT_WR);
  std::string buffer(size_t{1} << 16, '\0');
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd ready{fd, static_cast<short>(POLLIN | (written < input.size() ? POLLOUT : 0)), 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left.count(), 60000)));
    if (polled < 0 && errno == EINTR) continue;
    if (polled <= 0) continue;  // the deadline is checked above
    if (written < input.size() && (ready.revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n =
          ::send(fd, input.data() + written, input.size() - written, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) written += static_cast<size_t>(n);
      // The child stopped reading (it failed early, or died): what it said still counts.
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = input.size();
      if (written == input.size()) ::shutdown(fd, SHUT_WR);
    }
    if (ready.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return true;
      answer.append(buffer.data(), static_cast<size_t>(n));
    }
  }
}

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

}  // namespace

std::string run_helper(const std::string& what, const std::string& program,
                       const std::vector<std::string>& args, const std::string& input,
                       std::chrono::seconds timeout, const std::string& timeout_name) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    fail("{}: cannot make a socket to a helper process: {}", what, std::strerror(errno));
  }
  Fd ours{pair[0]}, theirs{pair[1]};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, theirs.fd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, theirs.fd, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> words{program};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned =
      ::posix_spawn(&pid, program.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    fail("{}: cannot start its helper {}: {}", what, program, std::strerror(spawned));
  }
  theirs.reset();
  std::string answer;
  const bool in_time = exchange(ours.fd, input, std::chrono::steady_clock::now() + timeout, answer);
  ours.reset();
  if (!in_time) ::kill(pid, SIGKILL);
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (!in_time) {
    fail("{} failed: its process took longer than {} s{} and was stopped", what, timeout.count(),
         timeout_name.empty() ? "" : ", " + timeout_name + ",");
  }
  uint64_t length = 0;
  for (size_t i = 0; i < 8 && i + 1 < answer.size(); ++i) {
    length |= static_cast<uint64_t>(static_cast<unsigned char>(answer[1 + i])) << (8 * i);
  }
  const bool whole = answer.size() >= kHeader && answer.size() - kHeader == length &&
                     (answer[0] == 'R' || answer[0] == 'F');
  // With SIGCHLD ignored, or another reaper, waitpid finds no child: the answer alone counts.
  const bool exited_well = waited != pid || (WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!whole || !exited_well) {
    fail("{} failed: its process {}", what,
         waited == pid ? how_it_ended(status) : std::string("ended without a whole answer"));
  }
  const char tag = answer[0];
  answer.erase(0, kHeader);
  if (tag == 'F') throw Error(answer);
  return answer;
}

std::string graphviz_helper_path() {
  constexpr const char* kName = "tdfx-graphviz";
  std::vector<std::string> places;
  if (const char* given = std::getenv("TDFX_GRAPHVIZ_HELPER")) {
    if (given[0] != '/') {
      fail("viz: TDFX_GRAPHVIZ_HELPER must be an absolute path, not '{}'", given);
    }
    if (executable(given)) return given;
    fail("viz: TDFX_GRAPHVIZ_HELPER names '{}', which is not an executable file", given);
  }
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path dir = self.parent_path();
    for (const std::filesystem::path& candidate :
         {dir / kName, (dir / ".." / "libexec" / "tdfx" / kName).lexically_normal()}) {
      if (executable(candidate.string())) return candidate.string();
      places.push_back(candidate.string());
    }
  }
  if (tdfx_graphviz_helper_path != nullptr) {
    const std::string installed = tdfx_graphviz_helper_path();
    if (executable(installed)) return installed;
    places.push_back(installed);
  }
  fail(
      "viz: tdfx's Graphviz helper ({}) was not found; looked in {}. Install tdfx with "
      "cmake --install, link tdfx::viz through find_package(tdfx), or set TDFX_GRAPHVIZ_HELPER "
      "to its absolute path",
      kName, places.empty() ? std::string("no place") : fmt::format("{}", fmt::join(places, ", ")));
}

}  // namespace tdfx::detail
