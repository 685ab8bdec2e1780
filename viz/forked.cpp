#include "tdfx/viz/forked.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "tdfx/core/error.h"

namespace tdfx::detail {
namespace {

// The child's answer on the pipe: one tag byte, the length of what follows (8 bytes, little
// endian), then the result or the message. The length makes a cut-short answer visible
// whatever the exit status says.
constexpr char kResult = 'R';
constexpr char kFailure = 'F';
constexpr char kInternal = 'I';
constexpr size_t kHeader = 9;

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

/// In the child: runs the job, answers, and leaves by `_exit` only.
[[noreturn]] void child(int fd, const std::function<std::string()>& job) {
  // Nothing of the caller's stays open here but the answer's pipe: another thread's pipe
  // would otherwise not see its end until this child exits.
  if (fd > 3) ::close_range(3, static_cast<unsigned>(fd) - 1, 0);
  ::close_range(static_cast<unsigned>(fd) + 1, ~0U, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the caller gone, nobody reads the answer
  // A crash here is the caller's Error to report, not a crash of the caller's program: its
  // crash handlers (a reporter, a test framework's) and core dumps are not the child's.
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGINT, SIGTERM}) {
    std::signal(signal, SIG_DFL);
  }
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  // Should anything call exit(), the caller's exit handlers and static destructors must not
  // run here (flushing copied stdio buffers, removing the caller's files): registered last,
  // this one runs first.
  std::atexit([] { ::_exit(4); });
  char tag = kResult;
  std::string answer;
  try {
    answer = job();
  } catch (const InternalError& e) {
    tag = kInternal;
    answer = e.what();
  } catch (const std::exception& e) {
    tag = kFailure;
    answer = e.what();
  } catch (...) {
    tag = kFailure;
    answer = "an exception that is not a std::exception";
  }
  char header[kHeader] = {tag};
  const uint64_t length = answer.size();
  for (size_t i = 0; i < 8; ++i) header[1 + i] = static_cast<char>(length >> (8 * i));
  const bool sent = write_all(fd, header, kHeader) && write_all(fd, answer.data(), answer.size());
  ::_exit(sent ? 0 : 3);
}

/// How a child ended, for a message: `killed by signal 11 (Segmentation fault)`.
std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = sigabbrev_np(signal);
    return fmt::format("killed by signal {} ({})", signal, name ? name : "?");
  }
  return fmt::format("exited with status {} without an answer", WEXITSTATUS(status));
}

/// Reads the child's whole answer, or stops at the deadline: false then.
bool read_answer(int fd, std::chrono::seconds timeout, std::string& answer) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string buffer(size_t{1} << 16, '\0');
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd ready{fd, POLLIN, 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left.count(), 60000)));
    if (polled < 0 && errno == EINTR) continue;
    if (polled == 0) continue;  // the deadline is checked above
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    answer.append(buffer.data(), static_cast<size_t>(n));
  }
}

}  // namespace

std::string run_forked(const std::string& what, const std::function<std::string()>& job,
                       std::chrono::seconds timeout) {
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
  const bool in_time = read_answer(fds[0], timeout, answer);
  ::close(fds[0]);
  if (!in_time) ::kill(pid, SIGKILL);
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (!in_time)
    fail("{} failed: its process took longer than {} s and was stopped", what, timeout.count());
  uint64_t length = 0;
  for (size_t i = 0; i < 8 && i + 1 < answer.size(); ++i) {
    length |= static_cast<uint64_t>(static_cast<unsigned char>(answer[1 + i])) << (8 * i);
  }
  const bool whole = answer.size() >= kHeader && answer.size() - kHeader == length;
  // With SIGCHLD ignored, or another reaper, waitpid finds no child: the answer alone counts.
  const bool exited_well = waited != pid || (WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!whole || !exited_well) {
    fail("{} failed: its process {}", what,
         waited == pid ? how_it_ended(status) : std::string("ended without a whole answer"));
  }
  const char tag = answer[0];
  answer.erase(0, kHeader);
  if (tag == kInternal) throw InternalError(answer);
  if (tag == kFailure) throw Error(answer);
  return answer;
}

}  // namespace tdfx::detail
