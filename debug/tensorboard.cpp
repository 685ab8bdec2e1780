#include "tdfx/debug/tensorboard.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
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

uint32_t crc32c(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes)
    crc = table[(crc ^ static_cast<unsigned char>(c)) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

}  // namespace

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// --- the messages ---------------------------------------------------------------

namespace {

// Adds a field to `message`; `oneof`: the index of the message's oneof it belongs to, or -1.
// A member of a oneof is written even when it holds its default (a scalar of 0 is written),
// as in TensorBoard's protos; another field of a proto3 message is not.
void add_field(pb::DescriptorProto& message, const char* name, int number,
               pb::FieldDescriptorProto::Type type, const char* type_name = nullptr,
               bool repeated = false, int oneof = -1) {
  pb::FieldDescriptorProto* field = message.add_field();
  field->set_name(name);
  field->set_number(number);
  field->set_type(type);
  field->set_label(repeated ? pb::FieldDescriptorProto::LABEL_REPEATED
                            : pb::FieldDescriptorProto::LABEL_OPTIONAL);
  if (type_name) field->set_type_name(type_name);
  if (oneof >= 0) field->set_oneof_index(oneof);
}

// The fields of Event, Summary, Summary.Value and HistogramProto that tdfx writes, numbered as
// TensorBoard's protos number them, in their oneofs (proto3: repeated doubles are packed).
pb::FileDescriptorProto event_file_proto() {
  using F = pb::FieldDescriptorProto;
  pb::FileDescriptorProto file;
  file.set_name("tdfx/tensorboard_event.proto");
  file.set_package("tensorboard");
  file.set_syntax("proto3");
  pb::DescriptorProto& histogram = *file.add_message_type();
  histogram.set_name("HistogramProto");
  add_field(histogram, "min", 1, F::TYPE_DOUBLE);
  add_field(histogram, "max", 2, F::TYPE_DOUBLE);
  add_field(histogram, "num", 3, F::TYPE_DOUBLE);
  add_field(histogram, "sum", 4, F::TYPE_DOUBLE);
  add_field(histogram, "sum_squares", 5, F::TYPE_DOUBLE);
  add_field(histogram, "bucket_limit", 6, F::TYPE_DOUBLE, nullptr, true);
  add_field(histogram, "bucket", 7, F::TYPE_DOUBLE, nullptr, true);
  pb::DescriptorProto& summary = *file.add_message_type();
  summary.set_name("Summary");
  pb::DescriptorProto& value = *summary.add_nested_type();
  value.set_name("Value");
  value.add_oneof_decl()->set_name("value");
  add_field(value, "tag", 1, F::TYPE_STRING);
  add_field(value, "simple_value", 2, F::TYPE_FLOAT, nullptr, false, 0);
  add_field(value, "histo", 5, F::TYPE_MESSAGE, ".tensorboard.HistogramProto", false, 0);
  add_field(summary, "value", 1, F::TYPE_MESSAGE, ".tensorboard.Summary.Value", true);
  pb::DescriptorProto& event = *file.add_message_type();
  event.set_name("Event");
  event.add_oneof_decl()->set_name("what");
  add_field(event, "wall_time", 1, F::TYPE_DOUBLE);
  add_field(event, "step", 2, F::TYPE_INT64);
  add_field(event, "file_version", 3, F::TYPE_STRING, nullptr, false, 0);
  add_field(event, "summary", 5, F::TYPE_MESSAGE, ".tensorboard.Summary", false, 0);
  return file;
}

// The descriptors, built once, and the factory of their messages.
class EventSchema {
 public:
  static const EventSchema& get() {
    static const EventSchema schema;
    return schema;
  }

  std::unique_ptr<pb::Message> new_event() const {
    return std::unique_ptr<pb::Message>(factory_.GetPrototype(event_)->New());
  }
  const pb::Descriptor* event() const { return event_; }
  pb::MessageFactory* factory() const { return &factory_; }

 private:
  EventSchema() {
    const pb::FileDescriptor* file = pool_.BuildFile(event_file_proto());
    if (!file) throw InternalError("the TensorBoard event schema does not build");
    event_ = file->FindMessageTypeByName("Event");
    // The factory makes every prototype now: GetPrototype is then only a lookup.
    factory_.GetPrototype(event_);
    const pb::Descriptor* summary = file->FindMessageTypeByName("Summary");
    const pb::Descriptor* value = summary->FindNestedTypeByName("Value");
    const pb::Descriptor* histo = file->FindMessageTypeByName("HistogramProto");
    for (const pb::Descriptor* d : {event_, summary, value, histo}) {
      for (int i = 0; i < d->field_count(); ++i) {
        fields_[std::string(d->name()) + "." + std::string(d->field(i)->name())] = d->field(i);
      }
    }
  }

  pb::DescriptorPool pool_;
  mutable pb::DynamicMessageFactory factory_{&pool_};
  const pb::Descriptor* event_ = nullptr;
  std::unordered_map<std::string, const pb::FieldDescriptor*> fields_;  // "Message.field"

 public:
  /// The field `name` of `message` ("Event", "Summary", "Value", "HistogramProto").
  const pb::FieldDescriptor* field(const std::string& message, const std::string& name) const {
    return fields_.at(message + "." + name);
  }
};

// The fields tdfx sets, found once.
struct Fields {
  const pb::FieldDescriptor *wall_time, *step, *file_version, *summary;
  const pb::FieldDescriptor *value, *tag, *simple_value, *histo;
  const pb::FieldDescriptor *min, *max, *num, *sum, *sum_squares, *bucket_limit, *bucket;

  static const Fields& get() {
    static const Fields fields = [] {
      const EventSchema& s = EventSchema::get();
      return Fields{s.field("Event", "wall_time"),
                    s.field("Event", "step"),
                    s.field("Event", "file_version"),
                    s.field("Event", "summary"),
                    s.field("Summary", "value"),
                    s.field("Value", "tag"),
                    s.field("Value", "simple_value"),
                    s.field("Value", "histo"),
                    s.field("HistogramProto", "min"),
                    s.field("HistogramProto", "max"),
                    s.field("HistogramProto", "num"),
                    s.field("HistogramProto", "sum"),
                    s.field("HistogramProto", "sum_squares"),
                    s.field("HistogramProto", "bucket_limit"),
                    s.field("HistogramProto", "bucket")};
    }();
    return fields;
  }
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

  // Frames `event` as one record and writes it, flushed.
  void write(const pb::Message& event) {
    std::string data;
    if (!event.SerializeToString(&data)) {
      fail<Error>("{}: an event could not be serialised", path);
    }
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

  // A new event at `step` with a summary; add_value adds a value tagged `tag` to it.
  static std::pair<std::unique_ptr<pb::Message>, pb::Message*> summary_event(int64_t step) {
    const EventSchema& schema = EventSchema::get();
    std::unique_ptr<pb::Message> event = schema.new_event();
    const pb::Reflection* r = event->GetReflection();
    r->SetDouble(event.get(), Fields::get().wall_time, wall_time_now());
    r->SetInt64(event.get(), Fields::get().step, step);
    pb::Message* summary = r->MutableMessage(event.get(), Fields::get().summary, schema.factory());
    return {std::move(event), summary};
  }

  static pb::Message* add_value(pb::Message* summary, const std::string& tag) {
    pb::Message* value = summary->GetReflection()->AddMessage(summary, Fields::get().value,
                                                              EventSchema::get().factory());
    value->GetReflection()->SetString(value, Fields::get().tag, tag);
    return value;
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
  std::unique_ptr<pb::Message> event = EventSchema::get().new_event();
  const pb::Reflection* r = event->GetReflection();
  r->SetDouble(event.get(), Fields::get().wall_time, wall_time_now());
  r->SetString(event.get(), Fields::get().file_version, "brain.Event:2");
  impl_->write(*event);
}

EventFileWriter::~EventFileWriter() = default;

const std::string& EventFileWriter::path() const { return impl_->path; }

void EventFileWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  add_scalars(step, {{tag, value}});
}

void EventFileWriter::add_scalars(int64_t step,
                                  const std::vector<std::pair<std::string, double>>& values) {
  auto [event, summary] = Impl::summary_event(step);
  for (const auto& [tag, value] : values) {
    pb::Message* v = Impl::add_value(summary, tag);
    v->GetReflection()->SetFloat(v, Fields::get().simple_value, static_cast<float>(value));
  }
  impl_->write(*event);
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
  Histogram h;
  h.num = static_cast<double>(m.finite);
  if (m.finite == 0) return h;
  h.min = m.min;
  h.max = m.max;
  h.sum = m.sum;
  h.sum_squares = m.sum_squares;
  // Bucket i holds (limit[i-1], limit[i]]; the first everything up to limit[0] (TensorBoard
  // reads the first bucket from -DBL_MAX).
  const int n = m.min == m.max ? 1 : buckets;
  const double width = (m.max - m.min) / n;
  for (int i = 1; i <= n; ++i) h.limits.push_back(i == n ? m.max : m.min + width * i);
  h.counts = detail::bucket_counts(values, h.limits);
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
  auto [event, summary] = Impl::summary_event(step);
  for (const auto& [tag, h] : values) {
    pb::Message* v = Impl::add_value(summary, tag);
    pb::Message* histo =
        v->GetReflection()->MutableMessage(v, Fields::get().histo, EventSchema::get().factory());
    const pb::Reflection* r = histo->GetReflection();
    r->SetDouble(histo, Fields::get().min, h.min);
    r->SetDouble(histo, Fields::get().max, h.max);
    r->SetDouble(histo, Fields::get().num, h.num);
    r->SetDouble(histo, Fields::get().sum, h.sum);
    r->SetDouble(histo, Fields::get().sum_squares, h.sum_squares);
    for (const double limit : h.limits) r->AddDouble(histo, Fields::get().bucket_limit, limit);
    for (const double count : h.counts) r->AddDouble(histo, Fields::get().bucket, count);
  }
  impl_->write(*event);
}

}  // namespace tdfx
