# Writes GCH.sum, the identity of the shared precompiled header, which ccache hashes instead of
# the header itself (CCACHE_PCH_EXTSUM, set by the compiler launcher in CMakeLists.txt).
#
# Why: GCC's .gch files are not reproducible (two compiles of the same header differ), and
# ccache otherwise hashes the .gch into every object compiled with it. A clone whose .gch was
# compiled rather than taken from the cache could then share no object with any other clone.
# The identity is what the header is made of, the same in every clone: each file the compile
# read (GCH.d) with its content, the compile's flags (FLAGS_FILE) and the compiler's version.
# Paths and text under SOURCE_DIR and BINARY_DIR are written relative to them.
#
#   cmake -DGCH=... -DSOURCE_DIR=... -DBINARY_DIR=... -DFLAGS_FILE=... -DCOMPILER=...
#         -P cmake/pch_sum.cmake

# Text with the clone's own folders replaced by placeholders (the build folder first: it may
# be inside the source folder).
function(clone_neutral out text)
  string(REPLACE "${BINARY_DIR}" "<build>" text "${text}")
  string(REPLACE "${SOURCE_DIR}" "<source>" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

if(NOT EXISTS "${GCH}.d" OR NOT EXISTS "${FLAGS_FILE}")
  # Without what the compile read, the header's own bytes: correct, shared with no other clone.
  file(MD5 "${GCH}" sum)
  file(WRITE "${GCH}.sum" "${sum}\n")
  return()
endif()

file(READ "${GCH}.d" deps)
string(REGEX REPLACE "\\\\\n" " " deps "${deps}")  # make's line continuations
string(REGEX REPLACE "^[^:]*:" "" deps "${deps}")  # the target
separate_arguments(deps UNIX_COMMAND "${deps}")

set(identity "")
foreach(dep IN LISTS deps)
  # ccache writes the paths of a cached compile's dependencies relative to the build folder.
  get_filename_component(dep "${dep}" ABSOLUTE BASE_DIR "${BINARY_DIR}")
  string(FIND "${dep}" "${SOURCE_DIR}/" in_source)
  string(FIND "${dep}" "${BINARY_DIR}/" in_build)
  if(in_source EQUAL 0 OR in_build EQUAL 0)
    # The clone's own files (cmake_pch.hxx includes torch_pch.h by its absolute path).
    file(READ "${dep}" content)
    clone_neutral(content "${content}")
    string(MD5 sum "${content}")
  else()
    file(MD5 "${dep}" sum)
  endif()
  clone_neutral(name "${dep}")
  string(APPEND identity "${name} ${sum}\n")
endforeach()

file(READ "${FLAGS_FILE}" flags)
clone_neutral(flags "${flags}")
execute_process(COMMAND "${COMPILER}" --version OUTPUT_VARIABLE version COMMAND_ERROR_IS_FATAL ANY)
string(APPEND identity "${flags}\n${version}")

string(MD5 sum "${identity}")
file(WRITE "${GCH}.sum" "${sum}\n")
