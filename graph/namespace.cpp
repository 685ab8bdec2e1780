#include "tdfx/graph/namespace.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <iterator>
#include <unordered_set>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"

namespace tdfx {
namespace {

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_ascii_digit(c) || c == '_';
}

// Python 3.11's keyword.kwlist and dir(builtins), and torch.fx's
// _custom_builtins: names a generated forward must not shadow; and `self`, its
// first parameter, which a key called "self" would repeat.
const std::unordered_set<std::string_view>& reserved_names() {
  static const std::unordered_set<std::string_view> names = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
      "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if",
      "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
      "while", "with", "yield",
      // builtins
      "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup",
      "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError",
      "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
      "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning", "EnvironmentError",
      "Exception", "ExceptionGroup", "FileExistsError", "FileNotFoundError", "FloatingPointError",
      "FutureWarning", "GeneratorExit", "IOError", "ImportError", "ImportWarning",
      "IndentationError", "IndexError", "InterruptedError", "IsADirectoryError", "KeyError",
      "KeyboardInterrupt", "LookupError", "MemoryError", "ModuleNotFoundError", "NameError",
      "NotADirectoryError", "NotImplemented", "NotImplementedError", "OSError", "OverflowError",
      "PendingDeprecationWarning", "PermissionError", "ProcessLookupError", "RecursionError",
      "ReferenceError", "ResourceWarning", "RuntimeError", "RuntimeWarning", "StopAsyncIteration",
      "StopIteration", "SyntaxError", "SyntaxWarning", "SystemError", "SystemExit", "TabError",
      "TimeoutError", "TypeError", "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError",
      "UnicodeError", "UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError",
      "Warning", "ZeroDivisionError", "__build_class__", "__debug__", "__doc__", "__import__",
      "__loader__", "__name__", "__package__", "__spec__", "abs", "aiter", "all", "anext", "any",
      "ascii", "bin", "bool", "breakpoint", "bytearray", "bytes", "callable", "chr", "classmethod",
      "compile", "complex", "copyright", "credits", "delattr", "dict", "dir", "divmod", "enumerate",
      "eval", "exec", "exit", "filter", "float", "format", "frozenset", "getattr", "globals",
      "hasattr", "hash", "help", "hex", "id", "input", "int", "isinstance", "issubclass", "iter",
      "len", "license", "list", "locals", "map", "max", "memoryview", "min", "next", "object",
      "oct", "open", "ord", "pow", "print", "property", "quit", "range", "repr", "reversed",
      "round", "set", "setattr", "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple",
      "type", "vars", "zip",
      // torch.fx's custom builtins
      "inf", "nan", "NoneType", "torch", "device", "fx_pytree", "pytree",
      // the generated forward's first parameter
      "self"};
  return names;
}

constexpr size_t kReservedFilterBits = 4096;

// Where a non-empty name falls in is_reserved's filter.
size_t reserved_filter_slot(std::string_view name) {
  const auto at = [&](size_t i) {
    return static_cast<size_t>(static_cast<unsigned char>(name[i]));
  };
  return (name.size() * 977 + at(0) * 131 + at(name.size() > 1 ? 1 : 0) * 31 +
          at(name.size() - 1)) %
         kReservedFilterBits;
}

}  // namespace

bool Namespace::is_reserved(std::string_view name) {
  // A filter on (length, first, second and last character): most node names share no
  // such tuple with a reserved name and are rejected before hashing.
  static const auto filter = [] {
    std::vector<bool> bits(kReservedFilterBits);
    for (const std::string_view reserved : reserved_names())
      bits[reserved_filter_slot(reserved)] = true;
    return bits;
  }();
  if (name.empty() || !filter[reserved_filter_slot(name)]) return false;
  return reserved_names().count(name) > 0;
}

std::string identifier_from(std::string_view raw) {
  // Most names are identifiers already. (ASCII tests, not the locale's: the same bytes are
  // legal in every locale, and these run for every node a pass makes.)
  if (is_python_identifier(raw)) return std::string(raw);
  // Runs of characters illegal in an identifier become one '_'; a leading digit gets a '_'
  // before it (`0.module.fc.weight` becomes `_0_module_fc_weight`), written first so that the
  // name is made in one buffer.
  std::string candidate;
  candidate.reserve(raw.size() + 1);
  if (!raw.empty() && is_ascii_digit(raw[0])) candidate += '_';
  bool in_illegal_run = false;
  for (const char c : raw) {
    if (is_identifier_char(c)) {
      candidate += c;
      in_illegal_run = false;
    } else if (!in_illegal_run) {
      candidate += '_';
      in_illegal_run = true;
    }
  }
  if (candidate.empty()) candidate = "_";
  return candidate;
}

std::string parameter_name(std::string_view raw) {
  std::string name = identifier_from(raw);
  // `self` is forward's own first parameter: `def forward(self, self)` would not compile.
  return is_python_keyword(name) || name == "self" ? name + "_" : name;
}

size_t Namespace::StringTable::find(std::string_view key, size_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.stored == 0) return i;
    if (slot.hash == hash &&
        std::string_view(chars_.data() + slot.offset, slot.stored - 1) == key) {
      return i;
    }
  }
}

void Namespace::StringTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.stored == 0) continue;
    size_t i = slot.hash & mask;
    while (slots_[i].stored != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

std::pair<long long*, bool> Namespace::StringTable::insert(std::string_view key) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const size_t hash = std::hash<std::string_view>()(key);
  Slot& slot = slots_[find(key, hash)];
  if (slot.stored != 0) return {&slot.value, false};
  if (chars_.size() + key.size() >= UINT32_MAX) {
    throw GraphError("a namespace holds names of 4 GB in all; no more fit");
  }
  slot.hash = hash;
  slot.offset = static_cast<uint32_t>(chars_.size());
  slot.stored = static_cast<uint32_t>(key.size()) + 1;
  chars_.append(key);
  ++count_;
  return {&slot.value, true};
}

bool Namespace::StringTable::contains(std::string_view key) const {
  if (slots_.empty()) return false;
  return slots_[find(key, std::hash<std::string_view>()(key))].stored != 0;
}

bool Namespace::contains(const std::string& name) const { return used_.contains(name); }

std::string Namespace::create_name(std::string_view raw) {
  std::string converted;  // for a candidate that is not an identifier yet
  std::string_view candidate = raw;
  if (!is_python_identifier(raw)) {
    converted = identifier_from(raw);
    candidate = converted;
  }
  // A free name is taken as it is, unless its counter has a leading zero (`x_03` becomes
  // `x_3`, as in torch.fx). Most names are free: this is the common path, run for every node
  // a graph names.
  const auto underscore_at = candidate.rfind('_');
  const bool leading_zero = underscore_at != std::string_view::npos &&
                            underscore_at + 2 < candidate.size() &&
                            candidate[underscore_at + 1] == '0';
  if (!leading_zero && !is_reserved(candidate) && insert(candidate)) {
    return std::string(candidate);
  }
  // A trailing "_<digits>" is a counter to continue from. Candidates are written into one
  // buffer: a long chain of one op (`addmm_999`) names every node here.
  std::string_view base = candidate;
  long long num = 0;
  bool counted = false;
  if (underscore_at != std::string_view::npos && underscore_at + 1 < candidate.size()) {
    const std::string_view digits = candidate.substr(underscore_at + 1);
    const bool all_digits = std::all_of(digits.begin(), digits.end(), is_ascii_digit);
    if (all_digits && digits.size() < 18) {
      base = candidate.substr(0, underscore_at);
      std::from_chars(digits.data(), digits.data() + digits.size(), num);
      counted = true;
    }
  }
  std::string next;
  auto write = [&](long long n) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    next.assign(base);
    next += '_';
    next.append(digits, end);
  };
  const bool from_base = num == 0;
  long long* highest = from_base ? highest_suffix_.insert(base).first : nullptr;
  if (counted) {
    write(num);
  } else if (!leading_zero) {
    // The bare candidate was refused above (reserved or taken): count from its first free
    // suffix, as the loop below would after trying it again.
    num = std::max(1LL, *highest + 1);
    write(num);
  } else {
    next.assign(candidate);
  }
  while (is_reserved(next) || !insert(next)) {  // insert takes it when free
    ++num;
    // Names are never freed, so when counting up from the bare base every
    // suffix up to the highest handed out that way is taken: skip them.
    if (from_base && num <= *highest) num = *highest + 1;
    write(num);
  }
  // `highest` stays valid: nothing was added to highest_suffix_ since (names go to used_).
  if (from_base && num > *highest) *highest = num;
  return next;
}

std::string snake_case(std::string_view name) {
  std::string out;
  bool prev_lower = false;
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (prev_lower && std::isupper(byte)) out += '_';
    out += static_cast<char>(std::tolower(byte));
    prev_lower = std::islower(byte) != 0;
  }
  return out;
}

}  // namespace tdfx
