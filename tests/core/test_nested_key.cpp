#include <doctest/doctest.h>

#include "tdfx/core/error.h"
#include "tdfx/core/nested_key.h"

using tdfx::NestedKey;

TEST_CASE("nested key: a string key prints with quotes and joins to itself") {
  NestedKey key = "x";
  CHECK(key.repr() == "'x'");
  CHECK(key.str() == "x");
  CHECK(key.joined("_") == "x");
  CHECK_FALSE(key.is_tuple());
}

TEST_CASE("nested key: a tuple key prints as a Python tuple and joins with a separator") {
  NestedKey key = {"some", "key"};
  CHECK(key.repr() == "('some', 'key')");
  CHECK(key.str() == "(some, key)");
  CHECK(key.joined("_") == "some_key");
  CHECK(fmt::format("{}", key) == "('some', 'key')");
  CHECK(key.parent() == NestedKey("some"));
  CHECK(key.leaf() == "key");
  CHECK(key.starts_with("some"));
  CHECK_FALSE(key.starts_with("key"));
}

TEST_CASE("nested key: a one-element tuple equals the plain key but prints as a tuple") {
  NestedKey tuple = {"a"};
  CHECK(tuple == NestedKey("a"));
  CHECK(tuple.repr() == "('a',)");
}

TEST_CASE("nested key: join appends parts") {
  CHECK(NestedKey("a").join({"b", "c"}) == NestedKey({"a", "b", "c"}));
}

TEST_CASE("nested key: an empty key or part is a KeyError") {
  CHECK_THROWS_AS(NestedKey(""), tdfx::KeyError);
  CHECK_THROWS_WITH_AS(NestedKey({"a", ""}),
                       "key ('a', '') has an empty part; every part must be non-empty",
                       tdfx::KeyError);
  CHECK_THROWS_AS(NestedKey(std::vector<std::string>{}), tdfx::KeyError);
  CHECK_THROWS_WITH_AS(NestedKey("a").parent(), doctest::Contains("'a' has no parent"),
                       tdfx::KeyError);
}

TEST_CASE("nested key: a list of keys prints as a Python list") {
  CHECK(tdfx::repr({"x", {"a", "b"}}) == "['x', ('a', 'b')]");
}
