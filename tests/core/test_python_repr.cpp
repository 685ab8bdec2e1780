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
  // NormalParamExtractor's float32 bias, widened to double; Python printed it for
  // repr(float(numpy.log(numpy.expm1(numpy.float32(0.99))))).
  CHECK(python_float_repr(std::log(std::expm1(0.99f))) == "0.5254586935043335");
  // Neighbouring doubles near log(expm1(1.0)) need 15 and 16 digits; Python:
  // repr(float.fromhex('0x1.15288806261cbp-1')) and the same of '0x1.15288806261ccp-1'.
  CHECK(python_float_repr(0x1.15288806261cbp-1) == "0.541324854612918");
  CHECK(python_float_repr(0x1.15288806261ccp-1) == "0.5413248546129181");
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
