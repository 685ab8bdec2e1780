#include <ATen/ATen.h>
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <sstream>

#include "tdfx/core/error.h"
#include "tdfx/tensordict/access_hook.h"
#include "tdfx/tensordict/tensordict.h"

using tdfx::NestedKey;
using tdfx::TensorDict;

namespace {

std::vector<std::string> reprs(const std::vector<NestedKey>& keys) {
  std::vector<std::string> out;
  for (const auto& key : keys) out.push_back(key.repr());
  return out;
}

}  // namespace

TEST_CASE("tensordict: set and get round-trip a tensor and keep its storage") {
  TensorDict td({3});
  at::Tensor x = at::zeros({3, 4});
  td.set("x", x);
  CHECK(td.get("x").is_same(x));
  CHECK(td.batch_size() == std::vector<int64_t>{3});
  CHECK_FALSE(td.device().has_value());
  CHECK(td.size() == 1);
  CHECK_FALSE(td.empty());
  CHECK(TensorDict().empty());
}

TEST_CASE("tensordict: the initializer-list constructor sets every pair") {
  TensorDict td({{"a", at::zeros({2})}, {{"b", "c"}, at::ones({2, 5})}}, {2});
  CHECK(reprs(td.keys(true)) == std::vector<std::string>{"'a'", "'b'", "('b', 'c')"});
  CHECK(td.get({"b", "c"}).sizes() == at::IntArrayRef{2, 5});
  CHECK(td.get_sub("b").batch_size() == std::vector<int64_t>{2});
}

TEST_CASE("tensordict: set rejects a tensor whose leading dims differ from the batch size") {
  TensorDict td({32});
  CHECK_THROWS_WITH_AS(td.set("x", at::zeros({4, 3})),
                       "cannot set key 'x': shape [4, 3] does not start with batch size [32]",
                       tdfx::ShapeError);
  CHECK_THROWS_WITH_AS(td.set({"a", "b"}, at::zeros({})),
                       "cannot set key ('a', 'b'): shape [] does not start with batch size [32]",
                       tdfx::ShapeError);
  CHECK_FALSE(td.contains("a"));  // a rejected write creates no intermediate dict
}

TEST_CASE("tensordict: set of a nested key creates sub-dicts with the parent's batch size") {
  TensorDict td({4}, at::Device("cpu"));
  td.set({"input", "x"}, at::zeros({4, 2}));
  const TensorDict& sub = td.get_sub("input");
  CHECK(sub.batch_size() == std::vector<int64_t>{4});
  CHECK(sub.device() == at::Device("cpu"));
  CHECK(sub.get("x").sizes() == at::IntArrayRef{4, 2});
}

TEST_CASE("tensordict: set of a sub-TensorDict checks its batch size") {
  TensorDict td({3});
  td.set("sub", TensorDict({3, 2}));
  CHECK(td.get_sub("sub").batch_size() == std::vector<int64_t>{3, 2});
  td.set({"sub", "y"}, at::zeros({3, 2, 7}));
  CHECK_THROWS_WITH_AS(
      td.set({"sub", "z"}, at::zeros({3})),
      "cannot set key ('sub', 'z'): shape [3] does not start with batch size [3, 2]",
      tdfx::ShapeError);
  CHECK_THROWS_WITH_AS(td.set("other", TensorDict({2})),
                       doctest::Contains("'other': TensorDict batch size [2] does not start with "
                                         "batch size [3]"),
                       tdfx::ShapeError);
}

TEST_CASE("tensordict: set through a tensor is a KeyError") {
  TensorDict td;
  td.set("x", at::zeros({1}));
  CHECK_THROWS_WITH_AS(td.set({"x", "y"}, at::zeros({1})),
                       "cannot set key ('x', 'y'): 'x' is a tensor, not a TensorDict",
                       tdfx::KeyError);
}

TEST_CASE("tensordict: get of a missing key names it and lists the leaf keys") {
  TensorDict td;
  td.set({"input", "x"}, at::zeros({1}));
  td.set({"input", "mask"}, at::zeros({1}));
  CHECK_THROWS_WITH_AS(
      td.get({"input", "y"}),
      "key ('input', 'y') not found (did you mean ('input', 'x')?); keys: ('input', "
      "'x'), ('input', 'mask')",
      tdfx::KeyError);
  CHECK_THROWS_WITH_AS(TensorDict().get("a"), "key 'a' not found; the TensorDict is empty",
                       tdfx::KeyError);
  CHECK_THROWS_WITH_AS(td.get({"input", "x", "deeper"}), doctest::Contains("not found"),
                       tdfx::KeyError);
}

TEST_CASE("tensordict: get of a sub-dict and get_sub of a tensor say which kind it is") {
  TensorDict td;
  td.set({"a", "b"}, at::zeros({1}));
  CHECK_THROWS_WITH_AS(td.get("a"), doctest::Contains("key 'a' is a TensorDict, not a tensor"),
                       tdfx::KeyError);
  CHECK_THROWS_WITH_AS(td.get_sub({"a", "b"}),
                       doctest::Contains("key ('a', 'b') is a tensor, not a TensorDict"),
                       tdfx::KeyError);
  CHECK_THROWS_WITH_AS(td.get_sub("zz"), doctest::Contains("key 'zz' not found"), tdfx::KeyError);
}

TEST_CASE("tensordict: get_sub returns a reference that edits the parent") {
  TensorDict td;
  td.set({"a", "b"}, at::zeros({1}));
  td.get_sub("a").set("c", at::ones({1}));
  CHECK(td.contains({"a", "c"}));
}

TEST_CASE("tensordict: contains and erase work on plain and nested keys") {
  TensorDict td;
  td.set("x", at::zeros({1}));
  td.set({"a", "b"}, at::zeros({1}));
  td.set("y", at::zeros({1}));
  CHECK(td.contains("x"));
  CHECK(td.contains({"a", "b"}));
  CHECK(td.contains("a"));
  CHECK_FALSE(td.contains({"a", "z"}));
  td.erase("x");
  td.erase({"a", "b"});
  CHECK(reprs(td.keys(true)) == std::vector<std::string>{"'a'", "'y'"});
  CHECK(td.get("y").defined());  // the index still finds entries after an erase
  CHECK_THROWS_WITH_AS(td.erase("x"), doctest::Contains("key 'x' not found; keys: 'y'"),
                       tdfx::KeyError);
}

TEST_CASE("tensordict: keys keep insertion order with nested keys after their parent") {
  TensorDict td;
  td.set("z", at::zeros({1}));
  td.set({"b", "c"}, at::zeros({1}));
  td.set({"b", "d", "e"}, at::zeros({1}));
  td.set("a", at::zeros({1}));
  CHECK(reprs(td.keys()) == std::vector<std::string>{"'z'", "'b'", "'a'"});
  CHECK(reprs(td.keys(false, true)) == std::vector<std::string>{"'z'", "'a'"});
  CHECK(reprs(td.keys(true)) == std::vector<std::string>{"'z'", "'b'", "('b', 'c')", "('b', 'd')",
                                                         "('b', 'd', 'e')", "'a'"});
  CHECK(reprs(td.keys(true, true)) ==
        std::vector<std::string>{"'z'", "('b', 'c')", "('b', 'd', 'e')", "'a'"});
}

TEST_CASE("tensordict: copying shares tensors but not structure; clone copies tensors") {
  TensorDict td;
  td.set({"a", "b"}, at::zeros({2}));
  TensorDict copy = td;
  copy.set({"a", "c"}, at::zeros({2}));
  CHECK_FALSE(td.contains({"a", "c"}));
  CHECK(copy.get({"a", "b"}).is_same(td.get({"a", "b"})));
  TensorDict deep = td.clone();
  deep.get({"a", "b"}).fill_(1);
  CHECK(td.get({"a", "b"}).sum().item<float>() == 0);
  CHECK(tdfx::all_equal(td, copy.exclude({{"a", "c"}})));
  copy = copy;  // self-assignment keeps the dict
  CHECK(copy.contains({"a", "c"}));
  TensorDict moved = std::move(copy);
  CHECK(moved.contains({"a", "c"}));
}

TEST_CASE("tensordict: select keeps the given keys and is strict by default") {
  TensorDict td({2});
  td.set("x", at::zeros({2}));
  td.set({"a", "b"}, at::zeros({2}));
  td.set({"a", "c"}, at::zeros({2}));
  TensorDict selected = td.select({"x", {"a", "c"}});
  CHECK(reprs(selected.keys(true)) == std::vector<std::string>{"'x'", "'a'", "('a', 'c')"});
  CHECK(selected.batch_size() == td.batch_size());
  CHECK(reprs(td.select({"a"}).keys(true, true)) ==
        std::vector<std::string>{"('a', 'b')", "('a', 'c')"});
  CHECK_THROWS_WITH_AS(td.select({"nope"}), doctest::Contains("key 'nope' not found"),
                       tdfx::KeyError);
  CHECK(td.select({"nope", "x"}, false).keys().size() == 1);
}

TEST_CASE("tensordict: exclude drops the given keys and ignores missing ones") {
  TensorDict td;
  td.set("x", at::zeros({1}));
  td.set({"a", "b"}, at::zeros({1}));
  td.set({"a", "c"}, at::zeros({1}));
  CHECK(reprs(td.exclude({{"a", "b"}, "nope"}).keys(true, true)) ==
        std::vector<std::string>{"'x'", "('a', 'c')"});
  CHECK(td.contains({"a", "b"}));
}

TEST_CASE("tensordict: flatten_keys and unflatten_keys are inverses") {
  TensorDict td({1});
  td.set("x", at::zeros({1}));
  td.set({"a", "b", "c"}, at::ones({1}));
  TensorDict flat = td.flatten_keys();
  CHECK(reprs(flat.keys(true)) == std::vector<std::string>{"'x'", "'a.b.c'"});
  CHECK(reprs(td.flatten_keys("/").keys()) == std::vector<std::string>{"'x'", "'a/b/c'"});
  TensorDict back = flat.unflatten_keys();
  CHECK(tdfx::all_equal(back, td));
  CHECK(back.get_sub({"a", "b"}).batch_size() == std::vector<int64_t>{1});
}

TEST_CASE("tensordict: flatten_keys refuses two keys that flatten to the same name") {
  TensorDict td({1});
  td.set("a.b", at::zeros({1}));
  td.set({"a", "b"}, at::ones({1}));
  CHECK_THROWS_WITH_AS(td.flatten_keys(),
                       "flatten_keys: keys 'a.b' and ('a', 'b') both flatten to 'a.b'",
                       tdfx::KeyError);
  CHECK(reprs(td.flatten_keys("/").keys()) == std::vector<std::string>{"'a.b'", "'a/b'"});
}

TEST_CASE("tensordict: unflatten_keys refuses keys that clash and empty parts") {
  TensorDict same({1});
  same.set("a.b", at::zeros({1}));
  same.set({"a", "b"}, at::ones({1}));
  CHECK_THROWS_WITH_AS(same.unflatten_keys(),
                       "unflatten_keys: keys 'a.b' and ('a', 'b') unflatten to ('a', 'b') and "
                       "('a', 'b'), which clash",
                       tdfx::KeyError);
  TensorDict inside({1});
  inside.set("a.b", at::zeros({1}));
  inside.set("a", at::ones({1}));
  CHECK_THROWS_WITH_AS(inside.unflatten_keys(),
                       "unflatten_keys: keys 'a.b' and 'a' unflatten to ('a', 'b') and 'a', which "
                       "clash",
                       tdfx::KeyError);
  TensorDict outside({1});
  outside.set("a", at::ones({1}));
  outside.set("a.b", at::zeros({1}));
  CHECK_THROWS_WITH_AS(outside.unflatten_keys(),
                       "unflatten_keys: keys 'a' and 'a.b' unflatten to 'a' and ('a', 'b'), which "
                       "clash",
                       tdfx::KeyError);
  TensorDict empty_part({1});
  empty_part.set("a..b", at::ones({1}));
  CHECK_THROWS_WITH_AS(empty_part.unflatten_keys(),
                       "unflatten_keys: key 'a..b' split at '.' has an empty part", tdfx::KeyError);
  TensorDict siblings({1});
  siblings.set("a.b", at::zeros({1}));
  siblings.set("a.c", at::ones({1}));
  siblings.set("ab", at::ones({1}));
  CHECK(reprs(siblings.unflatten_keys().keys(true)) ==
        std::vector<std::string>{"'a'", "('a', 'b')", "('a', 'c')", "'ab'"});
}

TEST_CASE("tensordict: to casts every tensor and sets the device") {
  TensorDict td({2});
  td.set({"a", "b"}, at::zeros({2}, at::kLong));
  TensorDict doubles = td.to(at::kDouble);
  CHECK((doubles.get({"a", "b"}).scalar_type() == at::kDouble));
  TensorDict on_cpu = td.to(at::Device("cpu"));
  CHECK(on_cpu.device() == at::Device("cpu"));
  CHECK(on_cpu.get_sub("a").device() == at::Device("cpu"));
}

TEST_CASE("tensordict: apply maps every tensor and checks the batch size of the results") {
  TensorDict td({2});
  td.set("x", at::ones({2, 3}));
  td.set({"a", "y"}, at::ones({2}));
  TensorDict doubled = td.apply([](const at::Tensor& t) { return t * 2; });
  CHECK(doubled.get({"a", "y"}).sum().item<float>() == 4);
  CHECK_THROWS_AS(td.apply([](const at::Tensor& t) { return t.sum(); }), tdfx::ShapeError);
}

TEST_CASE("tensordict: update overwrites tensors and merges nested dicts") {
  TensorDict td;
  td.set("x", at::zeros({1}));
  td.set({"a", "b"}, at::zeros({1}));
  TensorDict other;
  other.set("x", at::ones({1}));
  other.set({"a", "c"}, at::ones({1}));
  td.update(other);
  CHECK(reprs(td.keys(true, true)) == std::vector<std::string>{"'x'", "('a', 'b')", "('a', 'c')"});
  CHECK(td.get("x").item<float>() == 1);
}

TEST_CASE("tensordict: all_equal compares structure and values") {
  TensorDict a({{"x", at::arange(3)}, {{"s", "y"}, at::ones({3})}}, {3});
  TensorDict b = a.clone();
  CHECK(tdfx::all_equal(a, b));
  b.get({"s", "y"}).add_(1);
  CHECK_FALSE(tdfx::all_equal(a, b));
  CHECK_FALSE(tdfx::all_equal(a, a.exclude({"x"})));
  CHECK_FALSE(tdfx::all_equal(a, a.to(at::kFloat)));
  TensorDict c({{"x", at::arange(3)}, {"s", at::ones({3})}}, {3});
  CHECK_FALSE(tdfx::all_equal(a, c));
}

TEST_CASE("tensordict: repr prints like Python's TensorDict with sorted fields") {
  TensorDict td({3});
  td.set("b", TensorDict({3}));
  td.set({"b", "c"}, at::zeros({3}, at::kLong));
  td.set("a", at::zeros({3, 4}));
  const std::string expected = R"(TensorDict(
    fields={
        a: Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32, is_shared=False),
        b: TensorDict(
            fields={
                c: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.int64, is_shared=False)},
            batch_size=torch.Size([3]),
            device=None,
            is_shared=False)},
    batch_size=torch.Size([3]),
    device=None,
    is_shared=False))";
  CHECK(td.repr() == expected);
  CHECK(fmt::format("{}", td) == expected);
  std::ostringstream os;
  os << td;
  CHECK(os.str() == expected);
}

TEST_CASE("tensordict: repr of an empty dict with a device") {
  const std::string expected = R"(TensorDict(
    fields={
    },
    batch_size=torch.Size([]),
    device=cpu,
    is_shared=False))";
  CHECK(TensorDict({}, at::Device("cpu")).repr() == expected);
}

namespace {

/// Records every access and negates what get returns.
struct RecordingHook : tdfx::KeyAccessHook {
  std::vector<std::string> log;
  at::Tensor on_read(const TensorDict&, const NestedKey& key, const at::Tensor& stored) override {
    log.push_back("read " + key.repr());
    return -stored;
  }
  void on_write(const TensorDict&, const NestedKey& key, const at::Tensor&) override {
    log.push_back("write " + key.repr());
  }
};

/// Supplies a placeholder for missing keys.
struct PlaceholderHook : RecordingHook {
  std::optional<at::Tensor> on_missing(const TensorDict&, const NestedKey& key) override {
    log.push_back("missing " + key.repr());
    return at::full({1}, 7.0);
  }
};

}  // namespace

TEST_CASE("tensordict: the access hook sees get and set and is restored after its scope") {
  TensorDict td;
  td.set("x", at::ones({1}));
  RecordingHook outer;
  CHECK(tdfx::current_key_access_hook() == nullptr);
  {
    tdfx::ScopedKeyAccessHook scope(&outer);
    CHECK(tdfx::current_key_access_hook() == &outer);
    td.set({"a", "b"}, at::ones({1}));
    CHECK(td.get("x").item<float>() == -1);
    CHECK_THROWS_AS(td.get("missing"), tdfx::KeyError);  // default on_missing → KeyError
    PlaceholderHook inner;
    {
      tdfx::ScopedKeyAccessHook nested(&inner);
      CHECK(td.get("missing").item<float>() == 7);
    }
    CHECK(tdfx::current_key_access_hook() == &outer);
    CHECK(inner.log == std::vector<std::string>{"missing 'missing'"});
  }
  CHECK(tdfx::current_key_access_hook() == nullptr);
  CHECK(outer.log == std::vector<std::string>{"write ('a', 'b')", "read 'x'"});
  CHECK(td.get("x").item<float>() == 1);
}

TEST_CASE("tensordict: a write rejected for its shape is not reported to the hook") {
  TensorDict td({2});
  RecordingHook hook;
  tdfx::ScopedKeyAccessHook scope(&hook);
  CHECK_THROWS_AS(td.set("x", at::ones({3})), tdfx::ShapeError);
  CHECK(hook.log.empty());
}
