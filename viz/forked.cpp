#include "tdfx/viz/forked.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>

#include "tdfx/core/error.h"

namespace tdfx::detail {
namespace {

// The child's answer on the pipe: one tag byte, then the bytes of the result or the message.
constexpr char kResult = 'R';
constexpr char kFailure = 'F';

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

/// In the child: runs the job, answers, and leaves without running the parent's exit
/// handlers or flushing its stdio buffers (`_exit`).
[[noreturn]] void child(int fd, const std::function<std::string()>& job) {
  // A crash here is the parent's Error to report, not a crash of the caller's program: its
  // crash handlers (a reporter, a test framework's) are not the child's.
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(signal, SIG_DFL);
  char tag = kResult;
  std::string answer;
  try {
    answer = job();
  } catch (const std::exception& e) {
    tag = kFailure;
    answer = e.what();
  } catch (...) {
    tag = kFailure;
    answer = "an exception that is not a std::exception";
  }
  const bool sent = write_all(fd, &tag, 1) && write_all(fd, answer.data(), answer.size());
  ::_exit(sent ? 0 : 3);
}

/// How a child ended, for a message: `killed by signal 11 (Segmentation fault)`.
std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    return fmt::format("killed by signal {} ({})", signal, ::strsignal(signal));
  }
  return fmt::format("exited with status {} without an answer", WEXITSTATUS(status));
}

}  // namespace

std::string run_forked(const std::string& what, const std::function<std::string()>& job) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    fail("{}: cannot make a pipe to a child process: {}", what, std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    fail("{}: cannot start a child process: {}", what, std::strerror(error));
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], job);
  }
  ::close(fds[1]);
  std::string answer;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool answered = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !answer.empty();
  if (!answered) fail("{} failed: its process {}", what, how_it_ended(status));
  const bool failed = answer[0] == kFailure;
  answer.erase(0, 1);
  if (failed) throw Error(answer);
  return answer;
}

}  // namespace tdfx::detail
