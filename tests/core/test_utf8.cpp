#include <doctest/doctest.h>

#include "tdfx/core/utf8.h"

using tdfx::is_utf8;
using tdfx::utf8_sequence_length;

TEST_CASE("utf8: sequences of one to four bytes are measured, malformed ones are 0") {
  CHECK(utf8_sequence_length("a") == 1);
  CHECK(utf8_sequence_length("\xc3\xa9!") == 2);         // é
  CHECK(utf8_sequence_length("\xe2\x82\xac") == 3);      // €
  CHECK(utf8_sequence_length("\xf0\x9f\x98\x80") == 4);  // 😀
  CHECK(utf8_sequence_length("") == 0);
  CHECK(utf8_sequence_length("\xff") == 0);              // never in UTF-8
  CHECK(utf8_sequence_length("\xc0\xaf") == 0);          // overlong '/'
  CHECK(utf8_sequence_length("\xed\xa0\x80") == 0);      // a surrogate
  CHECK(utf8_sequence_length("\xf4\x90\x80\x80") == 0);  // past U+10FFFF
  CHECK(utf8_sequence_length("\xe2\x82") == 0);          // cut short
}

TEST_CASE("utf8: a text is UTF-8 when every sequence in it is") {
  CHECK(is_utf8(""));
  CHECK(is_utf8("plain \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  CHECK_FALSE(is_utf8("b\xff"));
  CHECK_FALSE(is_utf8("ok\xc3"));
}
