#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tdfx/core/python_repr.h"

using tdfx::python_float_repr;
using tdfx::python_repr;

TEST_CASE("python repr: floats print as Python's repr") {
  CHECK(python_float_repr(1.0) == "1.0");
  CHECK(python_float_repr(0.0) == "0.0");
  CHECK(python_float_repr(-0.0) == "-0.0");
  CHECK(python_float_repr(0.5) == "0.5");
  CHECK(python_float_repr(0.0001) == "0.0001");
  CHECK(python_float_repr(1e-05) == "1e-05");
  CHECK(python_float_repr(0.01) == "0.01");
  CHECK(python_float_repr(100.0) == "100.0");
  CHECK(python_float_repr(1e16) == "1e+16");
  CHECK(python_float_repr(1.5e16) == "1.5e+16");
  CHECK(python_float_repr(123456789012345.6) == "123456789012345.6");
  CHECK(python_float_repr(0.1 + 0.2) == "0.30000000000000004");
  CHECK(python_float_repr(-2.5e-7) == "-2.5e-07");
  CHECK(python_float_repr(std::log(std::expm1(0.99f))) != "");
  CHECK(python_float_repr(static_cast<double>(std::log(std::expm1(0.99f)))) ==
        "0.5254586935043335");
  CHECK(python_float_repr(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(python_float_repr(std::nan("")) == "nan");
}

TEST_CASE("python repr: strings pick quotes and escape as Python does") {
  CHECK(python_repr("input") == "'input'");
  CHECK(python_repr("it's") == "\"it's\"");
  CHECK(python_repr("a'b\"c") == "'a\\'b\"c'");
  CHECK(python_repr("a\nb\\") == "'a\\nb\\\\'");
  CHECK(python_repr(std::string("\x01", 1)) == "'\\x01'");
}

TEST_CASE("python repr: identifiers") {
  CHECK(tdfx::is_python_identifier("fc1"));
  CHECK(tdfx::is_python_identifier("_0"));
  CHECK_FALSE(tdfx::is_python_identifier("0"));
  CHECK_FALSE(tdfx::is_python_identifier("a.b"));
  CHECK_FALSE(tdfx::is_python_identifier(""));
}
