#pragma once

/// \file
/// TensorBoard event files: scalars and histograms by step, in the file format TensorBoard
/// reads (`tensorboard --logdir DIR` opens every `*tfevents*` file under DIR).
///
///     tdfx::EventFileWriter log("runs/ppo");
///     log.add_scalar("loss", loss.item<double>(), step);
///     log.add_histogram("actor/weight", actor->weight, step);
///
/// A file is a sequence of records, each the length of its data as a little-endian uint64, the
/// masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data (little-endian
/// uint32s). Each record's data is an `Event` protocol buffer: the first says the file's
/// version ("brain.Event:2"), each later one holds a `Summary` of the values of one step. The
/// messages are written with libprotobuf's wire-format writer (CodedOutputStream,
/// WireFormatLite), field by field, numbered as TensorBoard's event.proto, summary.proto and
/// histogram.proto number them.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tdfx {

/// A histogram as TensorBoard stores one: the count, sum, sum of squares, min and max of the
/// values, and for each bucket its upper limit and its count (the first bucket takes
/// everything up to its limit).
struct Histogram {
  ///@{
  /// The values' min, max, count (`num`), sum and sum of squares; each bucket's upper limit and
  /// count.
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> limits, counts;
  ///@}
};

/// The histogram of the finite elements of `values`, any dtype but complex, in `buckets`
/// buckets of equal width from their min to their max (one bucket when they are equal; none
/// when no element is finite). Error when `buckets` is not in 1..10000 or `values` is complex,
/// quantized, sparse or a meta tensor.
Histogram histogram_of(const at::Tensor& values, int buckets = 30);

namespace detail {
struct Moments;
}

/// histogram_of `values` whose moments (detail::moments_of) are known already, `buckets` in
/// 1..10000 (Error otherwise, as histogram_of): a watch that records them saves a pass over the
/// data.
Histogram histogram_from(const at::Tensor& values, const detail::Moments& moments,
                         int buckets = 30);

/// Appends scalars and histograms to one new event file. Each add writes and flushes one whole
/// record, so a run that stops leaves every record it added readable; one that cannot be
/// written is a FileError naming the file. Not thread-safe: one writer per thread.
class EventFileWriter {
 public:
  /// Creates `logdir` (and its parents) if missing and a new file in it,
  /// `events.out.tfevents.<seconds since 1970>.<host name>.<process id>.<n>` (`n` counts the
  /// writers this process opened), whose first record gives the file version. FileError
  /// naming the folder or the file when it cannot.
  explicit EventFileWriter(const std::string& logdir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  /// The file it writes.
  const std::string& path() const;

  /// A scalar (TensorBoard's Scalars tab): `tag` at `step`, stored as a float32 as
  /// TensorBoard's simple_value is.
  void add_scalar(const std::string& tag, double value, int64_t step);

  /// Several scalars at `step` in one record (one Event, a Summary of them all): what a
  /// training step logs, written at once.
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);

  /// A histogram (TensorBoard's Histograms and Distributions tabs) of `values`: histogram_of
  /// them. Non-finite elements are left out: log their count as a scalar.
  void add_histogram(const std::string& tag, const at::Tensor& values, int64_t step,
                     int buckets = 30);

  /// Several histograms at `step` in one record.
  void add_histograms(int64_t step, const std::vector<std::pair<std::string, Histogram>>& values);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The CRC-32C (Castagnoli) of `bytes`, masked as the records of an event file mask it:
/// rotated right by 15 bits, plus 0xa282ead8.
uint32_t masked_crc32c(std::string_view bytes);

}  // namespace tdfx
