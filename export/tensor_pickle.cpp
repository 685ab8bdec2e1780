#include "tdfx/export/tensor_pickle.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"

namespace tdfx::detail {
namespace {

// Bounds far above anything torch.save writes for a tensor or a dict of them
// (it batches dict items by 1,000 and nests tuples three deep).
constexpr size_t kMaxStack = size_t{1} << 16;
constexpr size_t kMaxMarks = 16;
constexpr size_t kMaxMemo = size_t{1} << 18;
constexpr size_t kMaxTensors = size_t{1} << 16;
constexpr int kMaxTupleDepth = 8;
constexpr size_t kMaxDims = 64;
constexpr uint32_t kMaxString = 1u << 20;
constexpr size_t kMaxGlobalLine = 128;
constexpr size_t kMaxKey = 1024;
// The most of a string from the file a message shows.
constexpr size_t kShownChars = 64;
constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kOrderedDict = "collections.OrderedDict";

constexpr std::array<std::pair<c10::ScalarType, const char*>, 12> kStorageClasses{{
    {c10::ScalarType::Float, "FloatStorage"},
    {c10::ScalarType::Double, "DoubleStorage"},
    {c10::ScalarType::Half, "HalfStorage"},
    {c10::ScalarType::BFloat16, "BFloat16Storage"},
    {c10::ScalarType::Long, "LongStorage"},
    {c10::ScalarType::Int, "IntStorage"},
    {c10::ScalarType::Short, "ShortStorage"},
    {c10::ScalarType::Char, "CharStorage"},
    {c10::ScalarType::Byte, "ByteStorage"},
    {c10::ScalarType::Bool, "BoolStorage"},
    {c10::ScalarType::ComplexFloat, "ComplexFloatStorage"},
    {c10::ScalarType::ComplexDouble, "ComplexDoubleStorage"},
}};

// The opcodes of pickle protocols 0-5, for messages that name what was found.
// clang-format off
constexpr std::pair<uint8_t, const char*> kOpcodeNames[] = {
    {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'F', "FLOAT"},
    {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"}, {'M', "BININT2"},
    {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"}, {'S', "STRING"},
    {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"}, {'X', "BINUNICODE"},
    {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"}, {'}', "EMPTY_DICT"},
    {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"}, {'j', "LONG_BINGET"},
    {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"}, {'q', "BINPUT"},
    {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"}, {')', "EMPTY_TUPLE"},
    {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"},
    {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"}, {'B', "BINBYTES"},
    {'C', "SHORT_BINBYTES"}, {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"},
    {0x8e, "BINBYTES8"}, {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"},
    {0x92, "NEWOBJ_EX"}, {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"},
    {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
};
// clang-format on

const char* opcode_name(uint8_t op) {
  for (const auto& [code, name] : kOpcodeNames) {
    if (code == op) return name;
  }
  return nullptr;
}

// --- values on the unpickler's stack -----------------------------------------

enum class Callable { kRebuildTensor, kOrderedDict, kStorageType };

struct Global {
  Callable callable;
  c10::ScalarType dtype;  // of a storage type
  const char* name;       // `FloatStorage`, for messages
};

struct Storage {
  at::Tensor data;  // 1-d, contiguous
};

struct Dict {
  TensorEntries entries;
  std::unordered_set<std::string> names;  // a repeated key is found in constant time
};

struct Tuple;
// Tuples and strings are shared, never copied: a memo entry fetched a
// thousand times costs a thousand pointers, not a thousand copies.
using TuplePtr = std::shared_ptr<const Tuple>;
using StringPtr = std::shared_ptr<const std::string>;
using DictPtr = std::shared_ptr<Dict>;
using Value =
    std::variant<int64_t, bool, StringPtr, Global, TuplePtr, DictPtr, Storage, at::Tensor>;

struct Tuple {
  std::vector<Value> items;
  int depth;  // 1 + the deepest tuple inside: bounded, so destruction never recurses far
};

std::string kind_of(const Value& value) {
  struct Visitor {
    std::string operator()(int64_t) const { return "an int"; }
    std::string operator()(bool) const { return "a bool"; }
    std::string operator()(const StringPtr&) const { return "a str"; }
    std::string operator()(const Global& g) const {
      return std::string("the global ") + (g.callable == Callable::kStorageType ? "torch." : "") +
             g.name;
    }
    std::string operator()(const TuplePtr& t) const {
      return fmt::format("a tuple of {}", t->items.size());
    }
    std::string operator()(const DictPtr&) const { return "a dict"; }
    std::string operator()(const Storage&) const { return "a storage"; }
    std::string operator()(const at::Tensor&) const { return "a tensor"; }
  };
  return std::visit(Visitor{}, value);
}

// `text` as Python's repr, at most kShownChars of it: a message stays short and on one line.
std::string shown(const std::string& text) {
  if (text.size() <= kShownChars) return python_repr(text);
  return python_repr(text.substr(0, kShownChars)) + fmt::format("... ({} bytes)", text.size());
}

int depth_of(const Value& value) {
  if (const auto* tuple = std::get_if<TuplePtr>(&value)) return (*tuple)->depth;
  return std::holds_alternative<DictPtr>(value) ? 1 : 0;
}

// --- the reader ----------------------------------------------------------------

class PickleReader {
 public:
  PickleReader(std::string_view bytes, const StorageLoader& load_storage, std::string where)
      : bytes_(bytes), load_storage_(load_storage), where_(std::move(where)) {}

  TensorFile read() {
    if (bytes_.empty() || static_cast<uint8_t>(bytes_[0]) != 0x80) {
      refuse("does not start with a PROTO opcode: not a pickle torch.save writes");
    }
    while (true) {
      op_at_ = at_;
      const uint8_t op = next_byte();
      if (op == '.') return finish();
      step(op);
    }
  }

 private:
  template <typename... Args>
  [[noreturn]] void refuse(fmt::format_string<Args...> format, Args&&... args) const {
    fail<ArchiveError>("{}: at byte {}: {}", where_, op_at_,
                       fmt::format(format, std::forward<Args>(args)...));
  }

  // --- bytes ---
  const char* take(size_t n) {
    if (bytes_.size() - at_ < n) {
      refuse("the pickle ends in the middle of an opcode (truncated)");
    }
    const char* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  uint8_t next_byte() { return static_cast<uint8_t>(*take(1)); }
  uint64_t little_endian(size_t n) {
    const char* p = take(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(p[i]);
    return v;
  }
  std::string line() {
    const size_t end = bytes_.find('\n', at_);
    if (end == std::string_view::npos && bytes_.size() - at_ <= kMaxGlobalLine) {
      refuse("the pickle ends in the middle of an opcode (truncated)");
    }
    if (end == std::string_view::npos || end - at_ > kMaxGlobalLine) {
      refuse("GLOBAL is not followed by a module and a name on lines of at most {} bytes",
             kMaxGlobalLine);
    }
    std::string out(bytes_.substr(at_, end - at_));
    at_ = end + 1;
    return out;
  }

  // --- the stack ---
  void push(Value value) {
    if (stack_.size() >= kMaxStack) refuse("the stack holds more than {} values", kMaxStack);
    stack_.push_back(std::move(value));
  }
  Value pop(const char* op) {
    if (stack_.size() <= floor()) refuse("stack underflow: {} needs a value there is not", op);
    Value value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }
  // The values above the innermost MARK may be popped; the ones below are the caller's.
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<Value> pop_mark(const char* op) {
    if (marks_.empty()) refuse("{} without a MARK before it", op);
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Value> items(std::make_move_iterator(stack_.begin() + mark),
                             std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }
  std::vector<Value> pop_n(size_t n, const char* op) {
    std::vector<Value> items(n);
    for (size_t i = n; i-- > 0;) items[i] = pop(op);
    return items;
  }
  void push_tuple(std::vector<Value> items) {
    int depth = 0;
    for (const Value& item : items) depth = std::max(depth, depth_of(item));
    if (depth + 1 > kMaxTupleDepth) refuse("tuples nest deeper than {} levels", kMaxTupleDepth);
    push(std::make_shared<const Tuple>(Tuple{std::move(items), depth + 1}));
  }

  // --- opcodes ---
  void step(uint8_t op) {
    switch (op) {
      case 0x80:
        return proto();
      case 'c':
        return global();
      case 'q':
        return put(next_byte());
      case 'r':
        return put(little_endian(4));
      case 'h':
        return get(next_byte());
      case 'j':
        return get(little_endian(4));
      case '(':
        if (marks_.size() >= kMaxMarks) refuse("MARKs nest deeper than {} levels", kMaxMarks);
        marks_.push_back(stack_.size());
        return;
      case 't':
        return push_tuple(pop_mark("TUPLE"));
      case ')':
        return push_tuple({});
      case 0x85:
        return push_tuple(pop_n(1, "TUPLE1"));
      case 0x86:
        return push_tuple(pop_n(2, "TUPLE2"));
      case 0x87:
        return push_tuple(pop_n(3, "TUPLE3"));
      case 'X':
        return unicode();
      case 'K':
        return push(static_cast<int64_t>(next_byte()));
      case 'M':
        return push(static_cast<int64_t>(little_endian(2)));
      case 'J':
        return push(static_cast<int64_t>(static_cast<int32_t>(little_endian(4))));
      case 0x8a:
        return long1();
      case 0x88:
        return push(true);
      case 0x89:
        return push(false);
      case 'Q':
        return persistent_id();
      case 'R':
        return reduce();
      case '}':
        return push(std::make_shared<Dict>());
      case 's': {
        Value value = pop("SETITEM");
        Value key = pop("SETITEM");
        return set_items({std::move(key), std::move(value)}, "SETITEM");
      }
      case 'u':
        return set_items(pop_mark("SETITEMS"), "SETITEMS");
      default: {
        const char* name = opcode_name(op);
        if (name) {
          refuse("opcode {} (0x{:02x}) is not one torch.save writes for tensors", name, op);
        }
        refuse("0x{:02x} is not a pickle opcode", op);
      }
    }
  }

  void proto() {
    const uint8_t protocol = next_byte();
    if (op_at_ != 0) refuse("PROTO appears again");
    if (protocol != 2 && protocol != 3) {
      refuse("pickle protocol {} is not read (torch.save's default, 2, is)", protocol);
    }
  }

  void global() {
    const std::string module = line();
    const std::string name = line();
    const std::string full = module + "." + name;
    if (full == kRebuildTensor) {
      return push(Global{Callable::kRebuildTensor, c10::ScalarType::Undefined, kRebuildTensor});
    }
    if (full == kOrderedDict) {
      return push(Global{Callable::kOrderedDict, c10::ScalarType::Undefined, kOrderedDict});
    }
    if (module == "torch") {
      for (const auto& [dtype, storage] : kStorageClasses) {
        if (name == storage) return push(Global{Callable::kStorageType, dtype, storage});
      }
    }
    refuse(
        "global {} is not allowed (a tensor file may name only torch._utils._rebuild_tensor_v2, "
        "collections.OrderedDict and torch's storage types)",
        escape_controls(full));
  }

  void put(uint64_t index) {
    if (stack_.size() <= floor()) refuse("stack underflow: nothing to memoize");
    if (memo_.size() >= kMaxMemo && !memo_.count(index)) {
      refuse("the memo holds more than {} values", kMaxMemo);
    }
    memo_[index] = stack_.back();
  }

  void get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) refuse("memo index {} is read before it is written", index);
    push(it->second);
  }

  void unicode() {
    const uint64_t size = little_endian(4);
    if (size > kMaxString) refuse("a string of {} bytes is longer than {}", size, kMaxString);
    const char* p = take(size);
    push(std::make_shared<const std::string>(p, size));
  }

  void long1() {
    const uint8_t size = next_byte();
    if (size > 8) refuse("an integer of {} bytes does not fit 64 bits", size);
    uint64_t v = little_endian(size);
    // Two's complement of `size` bytes, sign-extended.
    if (size > 0 && size < 8 && (v >> (8 * size - 1)) & 1) v |= ~uint64_t{0} << (8 * size);
    push(static_cast<int64_t>(v));
  }

  // ('storage', torch.FloatStorage, key, location, numel)
  void persistent_id() {
    const Value pid = pop("BINPERSID");
    const auto* tuple = std::get_if<TuplePtr>(&pid);
    const auto string_at = [&](size_t i) -> const std::string* {
      const auto* s = std::get_if<StringPtr>(&(*tuple)->items[i]);
      return s ? s->get() : nullptr;
    };
    if (!tuple || (*tuple)->items.size() != 5 || !string_at(0) || *string_at(0) != "storage") {
      refuse("a persistent id must be ('storage', type, key, location, numel), not {}",
             kind_of(pid));
    }
    const auto& items = (*tuple)->items;
    const auto* type = std::get_if<Global>(&items[1]);
    if (!type || type->callable != Callable::kStorageType) {
      refuse("a persistent id names {}, not a storage type", kind_of(items[1]));
    }
    const std::string* key = string_at(2);
    if (!key || key->empty() || key->size() > 20 ||
        key->find_first_not_of("0123456789") != std::string::npos) {
      refuse("a storage key must be a short string of digits");
    }
    const std::string* location = string_at(3);
    if (!location || !is_location(*location)) {
      refuse("a storage location must be 'cpu' or 'cuda[:N]', not {}",
             location ? shown(*location) : kind_of(items[3]));
    }
    const auto* numel = std::get_if<int64_t>(&items[4]);
    if (!numel || *numel < 0) refuse("a storage size must be a non-negative int");
    at::Tensor data = load_storage_({*key, type->dtype, *numel});
    push(Storage{std::move(data)});
  }

  static bool is_location(const std::string& location) {
    if (location == "cpu" || location == "cuda") return true;
    return location.size() > 5 && location.size() < 10 && location.compare(0, 5, "cuda:") == 0 &&
           location.find_first_not_of("0123456789", 5) == std::string::npos;
  }

  void reduce() {
    const Value args = pop("REDUCE");
    const Value callable = pop("REDUCE");
    const auto* global = std::get_if<Global>(&callable);
    const auto* tuple = std::get_if<TuplePtr>(&args);
    if (!global || global->callable == Callable::kStorageType) {
      refuse("REDUCE calls {}; only _rebuild_tensor_v2 and OrderedDict may be called",
             kind_of(callable));
    }
    if (!tuple) refuse("REDUCE's arguments are {}, not a tuple", kind_of(args));
    if (global->callable == Callable::kOrderedDict) {
      if (!(*tuple)->items.empty()) refuse("OrderedDict is called with arguments");
      return push(std::make_shared<Dict>());
    }
    push(rebuild_tensor((*tuple)->items));
  }

  // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks)
  at::Tensor rebuild_tensor(const std::vector<Value>& args) {
    if (++tensors_ > kMaxTensors) refuse("the file holds more than {} tensors", kMaxTensors);
    const auto* storage = args.size() == 6 ? std::get_if<Storage>(&args[0]) : nullptr;
    const auto* offset = args.size() == 6 ? std::get_if<int64_t>(&args[1]) : nullptr;
    const auto* requires_grad = args.size() == 6 ? std::get_if<bool>(&args[4]) : nullptr;
    const auto* hooks = args.size() == 6 ? std::get_if<DictPtr>(&args[5]) : nullptr;
    if (!storage || !offset || !requires_grad || !hooks) {
      refuse(
          "_rebuild_tensor_v2 takes (storage, offset, size, stride, requires_grad, "
          "OrderedDict()); got {} arguments",
          args.size());
    }
    if (!(*hooks)->entries.empty()) refuse("a tensor has backward hooks");
    const std::vector<int64_t> sizes = int_tuple(args[2], "size");
    const std::vector<int64_t> strides = int_tuple(args[3], "stride");
    if (sizes.size() != strides.size()) {
      refuse("a tensor has {} sizes but {} strides", sizes.size(), strides.size());
    }
    check_in_bounds(sizes, strides, *offset, storage->data.numel());
    at::Tensor tensor = storage->data.as_strided(sizes, strides, *offset);
    if (*requires_grad) {
      if (!at::isFloatingType(tensor.scalar_type()) && !at::isComplexType(tensor.scalar_type())) {
        refuse("a {} tensor cannot require grad", dtype_name(tensor.scalar_type()));
      }
      tensor.set_requires_grad(true);
    }
    return tensor;
  }

  std::vector<int64_t> int_tuple(const Value& value, const char* what) {
    const auto* tuple = std::get_if<TuplePtr>(&value);
    if (!tuple) refuse("a tensor's {} is {}, not a tuple", what, kind_of(value));
    if ((*tuple)->items.size() > kMaxDims) refuse("a tensor has more than {} dimensions", kMaxDims);
    std::vector<int64_t> out;
    for (const Value& item : (*tuple)->items) {
      const auto* v = std::get_if<int64_t>(&item);
      if (!v || *v < 0)
        refuse("a tensor's {} holds {}, not a non-negative int", what,
               v ? "a negative int" : kind_of(item));
      out.push_back(*v);
    }
    return out;
  }

  // The elements a view reads are storage[offset + sum(i_k * stride_k)]: all of
  // them within the storage, computed without overflow. ATen multiplies the
  // sizes in order, so their running product must fit too.
  void check_in_bounds(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                       int64_t offset, int64_t storage_numel) {
    if (offset < 0) refuse("a tensor's storage offset {} is negative", offset);
    int64_t numel = 1;
    for (const int64_t size : sizes) {
      if (size != 0 && __builtin_mul_overflow(numel, size, &numel)) {
        refuse("a tensor's sizes [{}] overflow 64 bits", fmt::join(sizes, ", "));
      }
    }
    const bool empty = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
    if (empty) {
      if (offset > storage_numel) {
        refuse("a tensor's storage offset {} is past its storage of {} elements", offset,
               storage_numel);
      }
      return;
    }
    int64_t last = offset;
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t step = 0;
      if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &step) ||
          __builtin_add_overflow(last, step, &last)) {
        last = std::numeric_limits<int64_t>::max();
        break;
      }
    }
    if (last >= storage_numel) {
      refuse(
          "a tensor of sizes [{}], strides [{}] and offset {} reads past its storage of {} "
          "elements",
          fmt::join(sizes, ", "), fmt::join(strides, ", "), offset, storage_numel);
    }
  }

  void set_items(std::vector<Value> items, const char* op) {
    if (stack_.size() <= floor()) refuse("stack underflow: {} has no dict to fill", op);
    const auto* dict = std::get_if<DictPtr>(&stack_.back());
    if (!dict) refuse("{} fills {}, not a dict", op, kind_of(stack_.back()));
    if (items.size() % 2 != 0) refuse("{} has a key without a value", op);
    for (size_t i = 0; i < items.size(); i += 2) {
      const auto* key = std::get_if<StringPtr>(&items[i]);
      const auto* tensor = std::get_if<at::Tensor>(&items[i + 1]);
      if (!key) refuse("a dict key is {}, not a str", kind_of(items[i]));
      const std::string& name = **key;
      if (!tensor) {
        refuse("the value of {} is {}, not a tensor", shown(name), kind_of(items[i + 1]));
      }
      if (name.empty() || escape_controls(name) != name) {
        refuse("the key {} is empty or holds a control character", shown(name));
      }
      if (name.size() > kMaxKey) {
        refuse("the key {} is longer than {} bytes", shown(name), kMaxKey);
      }
      Dict& target = **dict;
      if (!target.names.insert(name).second) refuse("the key {} appears twice", shown(name));
      if (target.entries.size() >= kMaxTensors) {
        refuse("the dict holds more than {} tensors", kMaxTensors);
      }
      target.entries.emplace_back(name, *tensor);
    }
  }

  TensorFile finish() {
    if (at_ != bytes_.size()) refuse("{} bytes follow STOP", bytes_.size() - at_);
    if (!marks_.empty()) refuse("STOP with a MARK still open");
    if (stack_.size() != 1) refuse("STOP with {} values on the stack, not one", stack_.size());
    TensorFile out;
    if (const auto* tensor = std::get_if<at::Tensor>(&stack_.back())) {
      out.entries.emplace_back("", *tensor);
    } else if (const auto* dict = std::get_if<DictPtr>(&stack_.back())) {
      out.is_dict = true;
      out.entries = (*dict)->entries;
    } else {
      refuse("the file holds {}, not a tensor or a dict of tensors", kind_of(stack_.back()));
    }
    return out;
  }

  std::string_view bytes_;
  const StorageLoader& load_storage_;
  std::string where_;
  size_t at_ = 0;
  size_t op_at_ = 0;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
  size_t tensors_ = 0;
};

// --- the writer ----------------------------------------------------------------

class PickleWriter {
 public:
  std::string finish() {
    out_ += '.';
    return std::move(out_);
  }
  void op(char c) { out_ += c; }
  void op(uint8_t c) { out_ += static_cast<char>(c); }
  void global(const std::string& module, const std::string& name) {
    out_ += 'c' + module + '\n' + name + '\n';
  }
  void string(const std::string& s) {
    op('X');
    put_le(s.size(), 4);
    out_ += s;
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      put_le(static_cast<uint64_t>(v), 1);
    } else if (v >= 0 && v < 65536) {
      op('M');
      put_le(static_cast<uint64_t>(v), 2);
    } else if (v >= std::numeric_limits<int32_t>::min() &&
               v <= std::numeric_limits<int32_t>::max()) {
      op('J');
      put_le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {
      op(uint8_t{0x8a});
      put_le(8, 1);
      put_le(static_cast<uint64_t>(v), 8);
    }
  }
  void int_tuple(at::IntArrayRef values) {
    op('(');
    for (const int64_t v : values) integer(v);
    op('t');
  }

 private:
  void put_le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string out_;
};

void write_tensor(PickleWriter& w, const at::Tensor& tensor, size_t index) {
  w.global("torch._utils", "_rebuild_tensor_v2");
  w.op('(');
  w.op('(');
  w.string("storage");
  w.global("torch", storage_class(tensor.scalar_type()));
  w.string(std::to_string(index));
  w.string("cpu");
  w.integer(tensor.numel());
  w.op('t');
  w.op('Q');
  w.integer(0);
  w.int_tuple(tensor.sizes());
  w.int_tuple(tensor.strides());
  w.op(tensor.requires_grad() ? uint8_t{0x88} : uint8_t{0x89});
  w.global("collections", "OrderedDict");
  w.op(')');
  w.op('R');
  w.op('t');
  w.op('R');
}

}  // namespace

std::string storage_class(c10::ScalarType dtype) {
  for (const auto& [type, name] : kStorageClasses) {
    if (type == dtype) return name;
  }
  return "";
}

TensorFile read_tensor_pickle(std::string_view bytes, const StorageLoader& load_storage,
                              const std::string& where) {
  return PickleReader(bytes, load_storage, where).read();
}

std::string write_tensor_pickle(const TensorFile& file) {
  PickleWriter w;
  w.op(uint8_t{0x80});
  w.op(uint8_t{2});
  if (!file.is_dict) {
    write_tensor(w, file.entries.at(0).second, 0);
    return w.finish();
  }
  w.op('}');
  // SETITEMS in batches of 1,000, as Python's pickler writes a dict.
  for (size_t begin = 0; begin < file.entries.size(); begin += 1000) {
    w.op('(');
    for (size_t i = begin; i < std::min(file.entries.size(), begin + 1000); ++i) {
      w.string(file.entries[i].first);
      write_tensor(w, file.entries[i].second, i);
    }
    w.op('u');
  }
  return w.finish();
}

}  // namespace tdfx::detail
