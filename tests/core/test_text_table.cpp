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
  Table table({{"output", 0}, {"shape", 8}}, 28);
  table.add_row({"('output', 'probabilities')", "[32, 10]"});
  CHECK(printed(table) ==
        "output              shape\n"
        "('output', 'proba…  [32, 10]\n");
  CHECK(table.width() == 28);
  // However narrow the table, it keeps kMinNameWidth characters of it.
  Table narrow({{"output", 0}, {"shape", 8}}, 20);
  narrow.add_row({"('output', 'probabilities')", "[32, 10]"});
  CHECK(printed(narrow) ==
        "output            shape\n"
        "('output', 'pro…  [32, 10]\n");
  CHECK(narrow.width() == tdfx::kMinNameWidth + 2 + 8);
}

TEST_CASE("table: paths keep their end and cells keep their maximum") {
  Table table({{"input", 6}, {"source", 0, false, true}}, 24);
  table.add_row({"input_mask", "/tmp/some/dir/mask.pt"});
  CHECK(printed(table) ==
        "input   source\n"
        "input…  …ome/dir/mask.pt\n");
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

TEST_CASE("table: a cut never makes two cells look the same") {
  Table table({{"key", 18}, {"n", 3, true}});
  table.add_row({"('next', 'recurrent_state', 'h')", "1"});
  table.add_row({"('next', 'recurrent_state', 'c')", "2"});
  table.add_row({"('next', 'reward')", "3"});
  table.add_row({"('next', 'observation', 'pixels')", "4"});
  CHECK(table.str() ==
        "key                 n\n"
        "('next', 'recu…h')  1\n"
        "('next', 'recu…c')  2\n"
        "('next', 'reward')  3\n"
        "('next', 'obse…s')  4\n");
  // Cells that differ only in their middle keep enough of both ends.
  Table middle({{"name", 8}});
  middle.add_row({"abcdefghij_x"});
  middle.add_row({"abcdefghik_x"});
  CHECK(middle.str() ==
        "name\n"
        "abcd…j_x\n"
        "abcd…k_x\n");
}

TEST_CASE("table: names that no cut to the column's width tells apart widen it") {
  // Parameter paths alike at both ends: at 16 characters every cut of the first two reads the
  // same (`module.1.module.l…` twelve times was the parameter table's).
  Table table({{"parameter", 0}, {"n", 3, true}}, 19);
  table.add_row({"module.1.module.layers.0.linear1.weight", "1"});
  table.add_row({"module.1.module.layers.1.linear1.weight", "2"});
  table.add_row({"module.0.module.bias", "3"});
  CHECK(table.str() ==
        "parameter           n\n"
        "m…0.linear1.weight  1\n"
        "m…1.linear1.weight  2\n"
        "m…le.0.module.bias  3\n");
  CHECK(table.width() == 21);
}
