// Peak memory of a static trace of chain_N against an eager forward of the same chain (issue
// 36's goal: a trace's peak at most eager's plus the graph's). Not a Google Benchmark: each
// figure is one run in a child process of its own, so that what one run allocated and freed
// does not stay resident for the next.
//
// For each N, three children each build the chain, reset the kernel's peak-RSS mark
// (/proc/self/clear_refs, `5`), note their resident size, and then:
//   eager  run the chain's forward once and drop its result;
//   trace  symbolic_trace the chain and drop the traced module;
//   kept   symbolic_trace the chain and keep the traced module (the graph's memory: what the
//          trace retains).
// Each reports its peak resident size above the start (VmHWM − VmRSS at start); kept also
// what the live heap grew by (mallinfo2), the traced module's own memory. The eager and trace
// children run twice more, warmed: their setup first runs the same on a chain of one module,
// so that what a process pays once (LibTorch's first-use initialisation, the recorder's
// dispatcher fallback registered on the first trace) is not in the figure. Usage:
// bench_trace_memory [N ...] (default 100 1000 10000).
#include <ATen/ops/randn.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/chain_pipeline.h"

namespace {

// Bytes the heap holds for live allocations (malloc's arena and its mmap'd chunks), in kB:
// what a module keeps, which the resident size does not show once freed memory stays mapped.
long heap_kb() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<long>((info.uordblks + info.hblkhd) / 1024);
}

// A field of /proc/self/status in kB (`VmHWM`, `VmRSS`).
long status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// Runs `work` in a child after resetting its peak; returns (peak resident size above the start,
// live heap above the start after `work`) in MB, read back through a pipe; (-1, -1) when the
// child failed.
std::pair<double, double> measure(const std::function<void()>& setup,
                                  const std::function<void()>& work) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, -1};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    setup();
    std::ofstream("/proc/self/clear_refs") << "5";
    const long start = status_kb("VmRSS");
    const long heap_start = heap_kb();
    work();
    const long peak = status_kb("VmHWM");
    const std::string out =
        std::to_string(peak - start) + " " + std::to_string(heap_kb() - heap_start);
    if (write(fds[1], out.data(), out.size()) < 0) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  char buffer[64] = {};
  const ssize_t got = read(fds[0], buffer, sizeof buffer - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  long peak = -1, after = -1;
  if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      std::sscanf(buffer, "%ld %ld", &peak, &after) != 2) {
    return {-1, -1};
  }
  return {peak / 1024.0, after / 1024.0};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty()) sizes = {100, 1000, 10000};
  std::printf("%8s %10s %10s %10s %8s | warmed: %10s %10s %8s\n", "N", "eager MB", "trace MB",
              "graph MB", "ratio", "eager MB", "trace MB", "ratio");
  for (const int64_t n : sizes) {
    std::shared_ptr<tdfx::TensorDictSequential> pipeline;
    tdfx::TensorDict input;
    auto setup = [&] {
      pipeline = tdfx::bench::chain(n).pipeline;
      input = tdfx::TensorDict({{"h0", at::randn({16, 64})}}, {16});
    };
    auto eager_run = [&] {
      tdfx::TensorDict work(input);
      pipeline->forward(work);
    };
    auto trace_run = [&] { tdfx::symbolic_trace(pipeline, input); };
    // The same on a chain of one module, then the chain of n set up.
    auto warmed = [&](const std::function<void()>& run) {
      return [&, run] {
        pipeline = tdfx::bench::chain(1).pipeline;
        input = tdfx::TensorDict({{"h0", at::randn({16, 64})}}, {16});
        run();
        setup();
      };
    };
    const auto eager = measure(setup, eager_run);
    const auto trace = measure(setup, trace_run);
    static std::optional<tdfx::TDGraphModule> kept_module;
    const auto kept =
        measure(setup, [&] { kept_module.emplace(tdfx::symbolic_trace(pipeline, input)); });
    const auto warm_eager = measure(warmed(eager_run), eager_run);
    const auto warm_trace = measure(warmed(trace_run), trace_run);
    const double graph = kept.second;
    std::printf("%8lld %10.1f %10.1f %10.1f %8.2f | warmed: %10.1f %10.1f %8.2f\n",
                static_cast<long long>(n), eager.first, trace.first, graph,
                trace.first / (eager.first + graph), warm_eager.first, warm_trace.first,
                warm_trace.first / (warm_eager.first + graph));
  }
  return 0;
}
