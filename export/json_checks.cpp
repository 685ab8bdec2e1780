#include "tdfx/export/json_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <unordered_set>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/memory_budget.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/core/utf8.h"
#include "tdfx/export/archive_format.h"

namespace tdfx::detail {

using nlohmann::json;

// What a JSON value is, for messages: untrusted values are never printed whole.
std::string describe(const json& value) {
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    return python_repr(s.size() > 40 ? s.substr(0, 40) + "..." : s);
  }
  return std::string("a JSON ") + value.type_name();
}

// Names and strings that reach printed code and diagrams: no control
// characters, whatever the printers do with them.
const std::string& printable(const std::string& text, const std::string& what,
                             const std::string& where) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      fail<ArchiveError>("{}: {} {} holds a control character", where, what, python_repr(text));
    }
  }
  return text;
}

std::string byte_escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7F || c == '\\') {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

bool is_module_path(const std::string& path) {
  size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    // A keyword part (`module.lambda`) would print as invalid Python: `self.module.lambda`.
    if (!digits && (!is_python_identifier(part) || is_python_keyword(part))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// Every read of the document goes through these: a wrong type or a missing
// field is an ArchiveError saying where, never a crash.
const json& field(const json& object, const char* name, const std::string& where) {
  if (!object.is_object() || !object.contains(name)) {
    fail<ArchiveError>("{}: missing field '{}'", where, name);
  }
  return object.at(name);
}

std::string text(const json& object, const char* name, const std::string& where) {
  const json& value = field(object, name, where);
  if (!value.is_string()) fail<ArchiveError>("{}: field '{}' is not a string", where, name);
  return value.get<std::string>();
}

const json& array(const json& object, const char* name, const std::string& where) {
  const json& value = field(object, name, where);
  if (!value.is_array()) fail<ArchiveError>("{}: field '{}' is not a list", where, name);
  return value;
}

NestedKey key_from_json(const json& parts, bool is_tuple, const std::string& where) {
  if (!parts.is_array() || parts.empty())
    fail<ArchiveError>("{}: a key must be a non-empty list", where);
  std::vector<std::string> items;
  for (const json& part : parts) {
    if (!part.is_string()) fail<ArchiveError>("{}: a key part is not a string", where);
    items.push_back(printable(part.get<std::string>(), "key part", where));
  }
  if (items.size() == 1 && !is_tuple) return NestedKey(items[0]);
  if (items.size() == 1) return NestedKey({items[0]});
  return NestedKey(std::move(items));
}

namespace {

// What the checks below need to know of a JSON text before any parser sees it, found in one
// pass without recursion.
struct JsonTextFacts {
  int depth = 0;                  // the deepest nesting of brackets
  std::string_view wide_integer;  // the first integer literal outside int64's range, or ""
};

// A JSON integer literal (no fraction, no exponent) past int64's range: the parser would keep
// 2^63..2^64-1 as unsigned (read as int64 they wrap negative) and make a float of anything
// wider; both are refused before it sees them.
bool outside_int64(std::string_view magnitude, bool negative) {
  const std::string_view limit = negative ? "9223372036854775808" : "9223372036854775807";
  return magnitude.size() > limit.size() || (magnitude.size() == limit.size() && magnitude > limit);
}

JsonTextFacts json_text_facts(std::string_view text) {
  JsonTextFacts facts;
  auto digit = [&](size_t i) { return std::isdigit(static_cast<unsigned char>(text[i])) != 0; };
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      facts.depth = std::max(facts.depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == '-' || digit(i)) {
      const size_t start = i;
      if (c == '-') ++i;
      const size_t digits = i;
      while (i < text.size() && digit(i)) ++i;
      const bool integral =
          i == text.size() || (text[i] != '.' && text[i] != 'e' && text[i] != 'E');
      const std::string_view magnitude = text.substr(digits, i - digits);
      // The rest of a float's literal; a malformed one is the parser's to refuse.
      while (i < text.size() && (digit(i) || std::strchr(".eE+-", text[i]) != nullptr)) ++i;
      if (integral && facts.wide_integer.empty() && outside_int64(magnitude, c == '-')) {
        facts.wide_integer = text.substr(start, i - start);
      }
      --i;  // the loop's ++i reads the character after the literal
    }
  }
  return facts;
}

// What reading program.json costs in memory, charged per JSON value as the parser meets it,
// before the document holds it: the value in the document (nlohmann's 16-byte slot with its
// list's spare capacity, an object's tree node, a string's heap copy) and what the graph made
// from it holds (an Argument, a node's fields, the field-name set kept to find repeats). Each is
// an upper bound of what this build measured (README: a list of 1.9 million `{"int": 1}` took
// about 280 bytes an element, charged 409).
constexpr uint64_t kScalarCost = 80;
constexpr uint64_t kContainerCost = 160;
constexpr uint64_t kKeyCost = 160;
constexpr uint64_t kStringCost = 96;

// Builds the document as nlohmann's parser does, and notes an object that repeats a field:
// which of the two would count is up to the parser (nlohmann keeps the last, another reader
// the first), so such a file is refused. (nlohmann's parser callback could see the keys too,
// but it rescans the enclosing object at every object's end: quadratic in a list's length.)
// Stops the parse once what it would hold passes `budget` bytes (see kScalarCost).
class RefusingDomBuilder {
 public:
  RefusingDomBuilder(json& result, uint64_t budget)
      : dom_(result, /*allow_exceptions=*/false), budget_(budget) {}

  bool null() { return charge(kScalarCost) && dom_.null(); }
  bool boolean(bool value) { return charge(kScalarCost) && dom_.boolean(value); }
  bool number_integer(json::number_integer_t value) {
    return charge(kScalarCost) && dom_.number_integer(value);
  }
  bool number_unsigned(json::number_unsigned_t value) {
    return charge(kScalarCost) && dom_.number_unsigned(value);
  }
  bool number_float(json::number_float_t value, const std::string& text) {
    return charge(kScalarCost) && dom_.number_float(value, text);
  }
  bool string(std::string& value) {
    return charge(kStringCost + 2 * value.size()) && dom_.string(value);
  }
  bool binary(json::binary_t& value) {
    return charge(kStringCost + 2 * value.size()) && dom_.binary(value);
  }
  bool start_object(std::size_t size) {
    if (!charge(kContainerCost)) return false;
    keys_.emplace_back();
    return dom_.start_object(size);
  }
  bool key(std::string& name) {
    if (!charge(kKeyCost + 3 * name.size())) return false;
    if (!keys_.back().insert(name).second) repeats = true;
    return dom_.key(name);
  }
  bool end_object() {
    keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t size) { return charge(kContainerCost) && dom_.start_array(size); }
  bool end_array() { return dom_.end_array(); }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& error) {
    return dom_.parse_error(position, token, error);
  }

  bool repeats = false;
  /// Whether the parse stopped because it went past the budget.
  bool over_budget = false;
  /// JSON values read so far.
  uint64_t values = 0;

 private:
  bool charge(uint64_t bytes) {
    ++values;
    charged_ += bytes;
    if (charged_ <= budget_) return true;
    over_budget = true;
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<std::unordered_set<std::string>> keys_;  // the fields of each open object
  uint64_t budget_;
  uint64_t charged_ = 0;
};

}  // namespace

json parse_program_json(const std::string& document_text, uint64_t memory_budget,
                        const std::string& where) {
  const JsonTextFacts facts = json_text_facts(document_text);
  if (facts.depth > kMaxJsonDepth) {
    fail<ArchiveError>("{}: program.json nests deeper than {} levels", where, kMaxJsonDepth);
  }
  if (const std::string_view wide = facts.wide_integer; !wide.empty()) {
    fail<ArchiveError>(
        "{}: program.json holds the integer {}, outside the 64-bit signed range", where,
        wide.size() > 40 ? std::string(wide.substr(0, 40)) + "..." : std::string(wide));
  }
  json document;
  RefusingDomBuilder builder(document, memory_budget);
  if (!json::sax_parse(document_text, &builder)) {
    if (builder.over_budget) {
      fail<ArchiveError>(
          "{}: reading program.json would go past the memory budget "
          "(LoadOptions::memory_budget, --memory-budget) of {}: it holds more than that after "
          "{} of its JSON values",
          where, bytes_text(memory_budget), builder.values);
    }
    fail<ArchiveError>("{}: program.json is not valid JSON", where);
  }
  if (builder.repeats) fail<ArchiveError>("{}: program.json repeats a field of an object", where);
  return document;
}

c10::ScalarType dtype_from_json(const json& value, const std::string& where) {
  const auto dtype = value.is_string() ? dtype_from_name(value.get<std::string>()) : std::nullopt;
  if (!dtype) fail<ArchiveError>("{}: invalid dtype {}", where, describe(value));
  return *dtype;
}

c10::Device device_from_json(const json& value, const std::string& where) {
  // Loaded programs run on the CPU; a device argument may only say so.
  if (!value.is_string() || value.get<std::string>() != "cpu") {
    fail<ArchiveError>("{}: invalid device {} (loaded programs run on 'cpu')", where,
                       describe(value));
  }
  return c10::Device(c10::kCPU);
}

std::vector<DerivedDim> derived_dims_from_json(const json& value, const TensorMeta& tensor,
                                               const std::string& where) {
  const char* const expected =
      "derived_dims must be a non-empty list of [dim, scale, divisor, offset], dimensions of "
      "the shape in increasing order and not batch dimensions, scale and divisor at least 1 "
      "(a divisor above 1 only with scale 1)";
  if (!tensor.shape || !value.is_array() || value.empty() || value.size() > tensor.shape->size()) {
    fail<ArchiveError>("{}: {}", where, expected);
  }
  std::vector<DerivedDim> dims;
  for (const json& item : value) {
    bool valid = item.is_array() && item.size() == 4;
    for (size_t i = 0; valid && i < 4; ++i) valid = item[i].is_number_integer();
    if (valid) {
      DerivedDim d{item[0].get<int64_t>(),
                   {item[1].get<int64_t>(), item[2].get<int64_t>(), item[3].get<int64_t>()}};
      valid = d.dim >= 0 && d.dim < static_cast<int64_t>(tensor.shape->size()) &&
              (dims.empty() || d.dim > dims.back().dim) &&
              !tensor.follows_batch(static_cast<size_t>(d.dim)) && d.size.scale >= 1 &&
              d.size.divisor >= 1 && (d.size.divisor == 1 || d.size.scale == 1);
      if (valid) dims.push_back(d);
    }
    if (!valid) fail<ArchiveError>("{}: {}", where, expected);
  }
  return dims;
}

std::vector<int64_t> batch_dims_from_json(const json& value,
                                          const std::optional<std::vector<int64_t>>& shape,
                                          const std::string& where) {
  if (!shape || !value.is_array() || value.empty() || value.size() > shape->size()) {
    fail<ArchiveError>("{}: batch_dims must be a non-empty list of dimensions of the shape", where);
  }
  std::vector<int64_t> dims;
  for (const json& d : value) {
    const bool valid = d.is_number_integer() && d.get<int64_t>() >= 0 &&
                       d.get<int64_t>() < static_cast<int64_t>(shape->size()) &&
                       (dims.empty() || d.get<int64_t>() > dims.back());
    if (!valid) {
      fail<ArchiveError>(
          "{}: batch dimension {} is not a dimension of the shape in increasing order", where,
          describe(d));
    }
    dims.push_back(d.get<int64_t>());
  }
  return dims;
}

std::vector<int64_t> shape_from_json(const json& value, const std::string& where) {
  if (!value.is_array() || value.size() > 64) {
    fail<ArchiveError>("{}: a shape must be a list of at most 64 sizes", where);
  }
  std::vector<int64_t> shape;
  for (const json& d : value) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      fail<ArchiveError>("{}: a size is not a non-negative int: {}", where, describe(d));
    }
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

}  // namespace tdfx::detail
