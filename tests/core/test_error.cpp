#include <c10/util/Exception.h>
#include <doctest/doctest.h>

#include <new>
#include <string>

#include "tdfx/core/error.h"

using tdfx::ArchiveError;
using tdfx::FileError;
using tdfx::KeyError;
using tdfx::RunError;

namespace {

// What `fn` threw, as "Type: message".
template <typename Fn>
std::string thrown(Fn&& fn) {
  try {
    fn();
  } catch (const ArchiveError& e) {
    return std::string("ArchiveError: ") + e.what();
  } catch (const FileError& e) {
    return std::string("FileError: ") + e.what();
  } catch (const RunError& e) {
    return std::string("RunError: ") + e.what();
  } catch (const KeyError& e) {
    return std::string("KeyError: ") + e.what();
  } catch (const tdfx::InternalError& e) {
    return std::string("InternalError: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
  return "nothing";
}

}  // namespace

TEST_CASE("rethrow_as: kept errors and bugs pass, everything else becomes the error asked for") {
  auto read = [](auto&& fn) {
    return thrown([&] {
      tdfx::rethrow_as<ArchiveError, ArchiveError, FileError>("a.pt2: cannot read the archive", fn);
    });
  };
  CHECK(read([] { throw FileError("a.pt2", "no such file"); }) == "FileError: a.pt2: no such file");
  CHECK(read([] { throw ArchiveError("a.pt2: bad"); }) == "ArchiveError: a.pt2: bad");
  CHECK(read([] { throw tdfx::InternalError("a bug"); }) == "InternalError: a bug");
  // A tdfx error of a kind not kept is a bad file, as LibTorch's and the allocator's are.
  CHECK(read([] { throw KeyError("no key 'x'"); }) ==
        "ArchiveError: a.pt2: cannot read the archive: no key 'x'");
  CHECK(read([] { TORCH_CHECK(false, "sizes differ"); }) ==
        "ArchiveError: a.pt2: cannot read the archive: sizes differ");
  CHECK(read([] { throw std::bad_alloc(); }) ==
        "ArchiveError: a.pt2: cannot read the archive: out of memory");
}

TEST_CASE("rethrow_as: returns what the function returns; a lazy what is made only on failure") {
  int made = 0;
  auto what = [&] {
    ++made;
    return std::string("while executing %relu");
  };
  CHECK(tdfx::rethrow_foreign_as<RunError>(what, [] { return 7; }) == 7);
  CHECK(made == 0);
  CHECK(thrown([&] {
          tdfx::rethrow_foreign_as<RunError>(what, [] { TORCH_CHECK(false, "bad input"); });
        }) == "RunError: while executing %relu: bad input");
  CHECK(made == 1);
  // rethrow_foreign_as keeps every tdfx error as it is.
  CHECK(thrown([&] {
          tdfx::rethrow_foreign_as<RunError>(what, [] { throw KeyError("no key 'x'"); });
        }) == "KeyError: no key 'x'");
  CHECK(made == 1);
}
