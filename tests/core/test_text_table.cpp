// The terminal tables of `tdfx run`: widths, alignment and ellipses.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

#include "tdfx/core/text_table.h"

using tdfx::Table;

namespace {

std::string printed(const Table& table) {
  std::ostringstream out;
  table.print(out);
  return out.str();
}

}  // namespace

TEST_CASE("table: columns fit their cells, numbers align right, no trailing spaces") {
  Table table({{"name", 0}, {"dtype", 10}, {"min", 9, true}});
  table.add_row({"x", "float32", "-1.5"});
  table.add_row({"longer_name", "int64", "3"});
  CHECK(printed(table) ==
        "name         dtype     min\n"
        "x            float32  -1.5\n"
        "longer_name  int64       3\n");
  CHECK(table.width() == 26);
}

TEST_CASE("table: the column without a maximum takes the room left, cut with an ellipsis") {
  Table table({{"output", 0}, {"shape", 8}}, 20);
  table.add_row({"('output', 'probabilities')", "[32, 10]"});
  CHECK(printed(table) ==
        "output      shape\n"
        "('output'…  [32, 10]\n");
  CHECK(table.width() == 20);
}

TEST_CASE("table: paths keep their end and cells keep their maximum") {
  Table table({{"input", 6}, {"source", 0, false, true}}, 20);
  table.add_row({"input_mask", "/tmp/some/dir/mask.pt"});
  CHECK(printed(table) ==
        "input   source\n"
        "input…  …dir/mask.pt\n");
  CHECK(tdfx::truncated("abc", 3) == "abc");
  CHECK(tdfx::truncated("abcd", 3) == "ab…");
  CHECK(tdfx::truncated("abcd", 3, true) == "…cd");
  CHECK(tdfx::display_width("a…b") == 3);
}

TEST_CASE("table: numbers fit nine characters, and nan and inf print by name") {
  CHECK(tdfx::table_number(NAN) == "nan");
  CHECK(tdfx::table_number(-INFINITY) == "-inf");
  CHECK(tdfx::table_number(0.000123456789) == "0.0001235");
  CHECK(tdfx::table_number(-1.23456e-12) == "-1.2e-12");
  CHECK(tdfx::table_number(-2.5) == "-2.5");
}
