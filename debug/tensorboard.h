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
/// version ("brain.Event:2"), each later one holds a `Summary` of one value at one step. The
/// messages are built with libprotobuf from descriptors declared in tensorboard.cpp by field
/// number, as TensorBoard's event.proto, summary.proto and histogram.proto number them.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace tdfx {

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

  /// A histogram (TensorBoard's Histograms and Distributions tabs) of the finite elements of
  /// `values`, any dtype but complex: their count, sum, sum of squares, min and max, in
  /// `buckets` buckets of equal width from the min to the max (one bucket when they are
  /// equal; none when no element is finite). Non-finite elements are left out: log their
  /// count as a scalar. Error when `buckets` is not in 1..10000 or `values` is complex.
  void add_histogram(const std::string& tag, const at::Tensor& values, int64_t step,
                     int buckets = 30);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The CRC-32C (Castagnoli) of `bytes`, masked as the records of an event file mask it:
/// rotated right by 15 bits, plus 0xa282ead8.
uint32_t masked_crc32c(std::string_view bytes);

}  // namespace tdfx
