#include "tdfx/debug/tensorboard.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/debug/moments.h"

namespace tdfx {

namespace pb = google::protobuf;

// --- CRC-32C --------------------------------------------------------------------

namespace {

// The reflected CRC-32C polynomial, a byte at a time through a table made once.
std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    table[i] = crc;
  }
  return table;
}

uint32_t crc32c_by_table(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes)
    crc = table[(crc ^ static_cast<unsigned char>(c)) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

#if defined(__x86_64__)
// SSE 4.2's crc32 instruction computes CRC-32C (the Castagnoli polynomial), 8 bytes at a time:
// the histograms of a watch that records every step make a few hundred kilobytes a step.
__attribute__((target("sse4.2"))) uint32_t crc32c_by_instruction(std::string_view bytes) {
  uint64_t crc = 0xFFFFFFFFu;
  const char* p = bytes.data();
  size_t n = bytes.size();
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc = __builtin_ia32_crc32di(crc, word);
  }
  auto crc32 = static_cast<uint32_t>(crc);
  for (; n > 0; --n, ++p) crc32 = __builtin_ia32_crc32qi(crc32, static_cast<unsigned char>(*p));
  return ~crc32;
}
#endif

uint32_t crc32c(std::string_view bytes) {
#if defined(__x86_64__)
  static const bool instruction = __builtin_cpu_supports("sse4.2");
  if (instruction) return crc32c_by_instruction(bytes);
#endif
  return crc32c_by_table(bytes);
}

}  // namespace

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// --- the messages ---------------------------------------------------------------

namespace {

using WFL = pb::internal::WireFormatLite;

// A message in protobuf's wire format, written field by field with libprotobuf's
// CodedOutputStream and WireFormatLite, numbered as TensorBoard's event.proto, summary.proto and
// histogram.proto number them. A nested message is written into a WireMessage of its own first, so
// that its enclosing message can write its length before it. Every field tdfx sets is written,
// 0 too (a proto3 reader takes a missing field as 0 all the same).
class WireMessage {
 public:
  WireMessage& double_field(int number, double v) {
    WFL::WriteDouble(number, v, &out());
    return *this;
  }
  WireMessage& float_field(int number, float v) {
    WFL::WriteFloat(number, v, &out());
    return *this;
  }
  WireMessage& int64_field(int number, int64_t v) {
    WFL::WriteInt64(number, v, &out());
    return *this;
  }
  WireMessage& string_field(int number, const std::string& v) {
    WFL::WriteString(number, v, &out());
    return *this;
  }
  // A repeated double, packed as proto3 packs it: one length, then the values.
  WireMessage& packed_doubles(int number, const std::vector<double>& values) {
    WFL::WriteTag(number, WFL::WIRETYPE_LENGTH_DELIMITED, &out());
    out().WriteVarint32(static_cast<uint32_t>(values.size() * sizeof(double)));
    for (const double v : values) WFL::WriteDoubleNoTag(v, &out());
    return *this;
  }
  WireMessage& message_field(int number, WireMessage& inner) {
    const std::string& bytes = inner.bytes();
    WFL::WriteTag(number, WFL::WIRETYPE_LENGTH_DELIMITED, &out());
    out().WriteVarint32(static_cast<uint32_t>(bytes.size()));
    out().WriteRaw(bytes.data(), static_cast<int>(bytes.size()));
    return *this;
  }
  // The bytes written; the message takes no more fields after.
  const std::string& bytes() {
    coded_.reset();
    stream_.reset();
    return data_;
  }

 private:
  pb::io::CodedOutputStream& out() {
    if (!coded_) {
      stream_ = std::make_unique<pb::io::StringOutputStream>(&data_);
      coded_ = std::make_unique<pb::io::CodedOutputStream>(stream_.get());
    }
    return *coded_;
  }

  std::string data_;
  std::unique_ptr<pb::io::StringOutputStream> stream_;
  std::unique_ptr<pb::io::CodedOutputStream> coded_;
};

// Field numbers: Event, Summary, Summary.Value, HistogramProto.
enum EventField { kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5 };
enum SummaryField { kValue = 1 };
enum ValueField { kTag = 1, kSimpleValue = 2, kHisto = 5 };
enum HistogramField {
  kMin = 1,
  kMax = 2,
  kNum = 3,
  kSum = 4,
  kSumSquares = 5,
  kBucketLimit = 6,
  kBucket = 7
};

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  std::string out(name.data());
  // A file name: no separator from the host.
  for (char& c : out) {
    if (c == '/') c = '_';
  }
  return out;
}

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

}  // namespace

struct EventFileWriter::Impl {
  std::string path;
  std::ofstream out;
  uint64_t written = 0;  // bytes of whole records

  // Frames an event's bytes as one record and writes it, flushed.
  void write(const std::string& data) {
    std::string record;
    record.reserve(data.size() + 16);
    put_le(record, data.size(), 8);
    put_le(record, masked_crc32c(record), 4);
    record += data;
    put_le(record, masked_crc32c(data), 4);
    out.write(record.data(), static_cast<std::streamsize>(record.size()));
    out.flush();
    if (!out) {
      // A record written in part would end the file for a reader: the file is cut back to
      // the records before it.
      out.close();
      std::error_code ignored;
      std::filesystem::resize_file(path, written, ignored);
      out.open(path, std::ios::binary | std::ios::app);
      throw FileError(path, "cannot write the event file");
    }
    written += record.size();
  }

  // An event at `step` holding `summary`.
  void write_summary(int64_t step, WireMessage& summary) {
    WireMessage event;
    event.double_field(kWallTime, wall_time_now()).int64_field(kStep, step);
    write(event.message_field(kSummary, summary).bytes());
  }
};

EventFileWriter::EventFileWriter(const std::string& logdir) : impl_(std::make_unique<Impl>()) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(logdir, error);
  if (error || !fs::is_directory(logdir)) {
    throw FileError(
        logdir, "cannot create the log folder" + (error ? ": " + error.message() : std::string()));
  }
  static std::atomic<int> opened{0};
  const auto seconds = static_cast<int64_t>(wall_time_now());
  impl_->path = (fs::path(logdir) / fmt::format("events.out.tfevents.{}.{}.{}.{}", seconds,
                                                host_name(), getpid(), opened++))
                    .string();
  impl_->out.open(impl_->path, std::ios::binary | std::ios::trunc);
  if (!impl_->out) throw FileError(impl_->path, "cannot create the event file");
  WireMessage event;
  impl_->write(event.double_field(kWallTime, wall_time_now())
                   .string_field(kFileVersion, "brain.Event:2")
                   .bytes());
}

EventFileWriter::~EventFileWriter() = default;

const std::string& EventFileWriter::path() const { return impl_->path; }

void EventFileWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  add_scalars(step, {{tag, value}});
}

void EventFileWriter::add_scalars(int64_t step,
                                  const std::vector<std::pair<std::string, double>>& values) {
  WireMessage summary;
  for (const auto& [tag, value] : values) {
    WireMessage v;
    v.string_field(kTag, tag).float_field(kSimpleValue, static_cast<float>(value));
    summary.message_field(kValue, v);
  }
  impl_->write_summary(step, summary);
}

namespace {

// `who`: the function named in the message.
void check_histogram(const at::Tensor& values, int buckets, const std::string& who) {
  if (buckets < 1 || buckets > 10000) {
    fail<Error>("{}: {} buckets; give 1 to 10000", who, buckets);
  }
  if (values.defined() && values.is_complex()) {
    fail<Error>("{}: a complex tensor has no histogram; log its real and imaginary parts apart",
                who);
  }
}

}  // namespace

Histogram histogram_from(const at::Tensor& values, const detail::Moments& m, int buckets) {
  check_histogram(values, buckets, "histogram_from");
  Histogram h;
  h.num = static_cast<double>(m.finite);
  if (m.finite == 0) return h;
  h.min = m.min;
  h.max = m.max;
  h.sum = m.sum;
  h.sum_squares = m.sum_squares;
  // TensorBoard reads the first bucket from -DBL_MAX, as equal_width_buckets counts it.
  detail::Buckets b = detail::equal_width_buckets(values, m, buckets);
  h.limits = std::move(b.limits);
  h.counts = std::move(b.counts);
  return h;
}

namespace {

Histogram make_histogram(const at::Tensor& values, int buckets) {
  return histogram_from(values, detail::moments_of(values), buckets);
}

}  // namespace

Histogram histogram_of(const at::Tensor& values, int buckets) {
  check_histogram(values, buckets, "histogram_of");
  return make_histogram(values, buckets);
}

void EventFileWriter::add_histogram(const std::string& tag, const at::Tensor& values, int64_t step,
                                    int buckets) {
  check_histogram(values, buckets, fmt::format("add_histogram('{}')", tag));
  add_histograms(step, {{tag, make_histogram(values, buckets)}});
}

void EventFileWriter::add_histograms(int64_t step,
                                     const std::vector<std::pair<std::string, Histogram>>& values) {
  WireMessage summary;
  for (const auto& [tag, h] : values) {
    WireMessage histo;
    histo.double_field(kMin, h.min).double_field(kMax, h.max).double_field(kNum, h.num);
    histo.double_field(kSum, h.sum).double_field(kSumSquares, h.sum_squares);
    histo.packed_doubles(kBucketLimit, h.limits).packed_doubles(kBucket, h.counts);
    WireMessage v;
    v.string_field(kTag, tag).message_field(kHisto, histo);
    summary.message_field(kValue, v);
  }
  impl_->write_summary(step, summary);
}

}  // namespace tdfx
