# Helpers shared by every component's CMakeLists.txt.

# The public components: each a library tdfx::NAME whose headers consumers include as
# <tdfx/NAME/...>. In the build tree <build>/include/tdfx/NAME links to the source folder,
# so the build sees the installed layout (cmake/install.cmake) and nothing else of the
# repository; <tdfx/tdfx.h> is the umbrella header at the repository root.
set(TDFX_COMPONENTS core tensordict graph codegen viz tracer diagram export onnx debug)
set(TDFX_BUILD_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)
file(MAKE_DIRECTORY ${TDFX_BUILD_INCLUDE_DIR}/tdfx)
foreach(component ${TDFX_COMPONENTS})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${component} ${TDFX_BUILD_INCLUDE_DIR}/tdfx/${component}
       SYMBOLIC)
endforeach()
file(CREATE_LINK ${PROJECT_SOURCE_DIR}/tdfx.h ${TDFX_BUILD_INCLUDE_DIR}/tdfx/tdfx.h SYMBOLIC)

# Unity builds: each library and the command compile as a few translation units, which
# parse LibTorch's headers a few times instead of once per source file (about half the
# time of a clean build). -DTDFX_UNITY_BUILD=OFF compiles file by file, for quicker
# rebuilds while editing one file.
option(TDFX_UNITY_BUILD "Compile the libraries and the tdfx command as unity builds" ON)

# One precompiled header for every target (cmake/torch_pch.h): built once by tdfx_pch and
# reused, instead of once per target. GCC reuses a PCH only when the code-generation flags
# match, so every tdfx target compiles position-independent code (-fPIC, executables too);
# -Winvalid-pch says so if a target ever stops matching.
add_library(tdfx_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/empty.cpp)
target_link_libraries(tdfx_pch PRIVATE ${TORCH_LIBRARIES} fmt::fmt)
target_precompile_headers(tdfx_pch PRIVATE ${PROJECT_SOURCE_DIR}/cmake/torch_pch.h)
# Beside the header, its identity (cmake/pch_sum.cmake says why), written after each compile
# of it and before any target compiles with it: where ccache is told to read it
# (TDFX_PCH_IDENTITY, CMakeLists.txt).
if(TDFX_PCH_IDENTITY)
  set(TDFX_PCH_GCH ${PROJECT_BINARY_DIR}/CMakeFiles/tdfx_pch.dir/cmake_pch.hxx.gch)
  add_custom_command(
    OUTPUT ${TDFX_PCH_GCH}.sum
    COMMAND ${CMAKE_COMMAND} -DGCH=${TDFX_PCH_GCH} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
            -DBINARY_DIR=${PROJECT_BINARY_DIR}
            -DFLAGS_FILE=${PROJECT_BINARY_DIR}/CMakeFiles/tdfx_pch.dir/flags.make
            -DCOMPILER=${CMAKE_CXX_COMPILER} -P ${PROJECT_SOURCE_DIR}/cmake/pch_sum.cmake
    DEPENDS ${TDFX_PCH_GCH} ${PROJECT_SOURCE_DIR}/cmake/pch_sum.cmake
    COMMENT "Writing the precompiled header's identity for ccache"
    VERBATIM)
  add_custom_target(tdfx_pch_sum DEPENDS ${TDFX_PCH_GCH}.sum)
  add_dependencies(tdfx_pch_sum tdfx_pch)
endif()

# tdfx_use_shared_pch(TARGET): TARGET compiles with the shared precompiled header.
function(tdfx_use_shared_pch target)
  target_precompile_headers(${target} REUSE_FROM tdfx_pch)
  if(TARGET tdfx_pch_sum)
    add_dependencies(${target} tdfx_pch_sum)
  endif()
  target_compile_options(${target} PRIVATE -Winvalid-pch)
endfunction()

# tdfx_add_library(NAME SOURCES ... [DEPS ...]): the library tdfx_NAME with its alias
# tdfx::NAME; its users see <tdfx/...> and nothing else of the repository.
function(tdfx_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(tdfx_${name} ${ARG_SOURCES})
  add_library(tdfx::${name} ALIAS tdfx_${name})
  # Installed as tdfx::NAME too (see cmake/install.cmake).
  set_target_properties(tdfx_${name} PROPERTIES EXPORT_NAME ${name})
  set_property(GLOBAL APPEND PROPERTY TDFX_LIBRARIES tdfx_${name})
  target_include_directories(tdfx_${name} PUBLIC
    $<BUILD_INTERFACE:${TDFX_BUILD_INCLUDE_DIR}> $<INSTALL_INTERFACE:include>)
  target_link_libraries(tdfx_${name} PUBLIC ${ARG_DEPS})
  target_compile_options(tdfx_${name} PRIVATE -Wall -Wextra)
  set_target_properties(tdfx_${name} PROPERTIES UNITY_BUILD ${TDFX_UNITY_BUILD})
  tdfx_use_shared_pch(tdfx_${name})
endfunction()

# tdfx_add_executable(NAME SOURCES ... [DEPS ...]): a program of the repository (the
# command, samples, benchmarks, fuzzers), which may also include the repository's
# own non-public headers ("samples/...", "bench/...", "tests/...").
function(tdfx_add_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  # -fPIC rather than CMake's -fPIE for executables: the shared PCH is built with -fPIC.
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(${name} PRIVATE -fPIC)
  tdfx_use_shared_pch(${name})
endfunction()

# The paths this build was configured with, for tests run outside CTest
# (tests/support/test_support.h): the one test object that differs between clones.
configure_file(${PROJECT_SOURCE_DIR}/tests/support/test_paths.cpp.in
               ${PROJECT_BINARY_DIR}/generated/test_paths.cpp @ONLY)
add_library(tdfx_test_paths OBJECT ${PROJECT_BINARY_DIR}/generated/test_paths.cpp)

# tdfx_add_test(COMPONENT SOURCES ... [DEPS ...]): one doctest binary
# test_COMPONENT per component, registered with CTest.
function(tdfx_add_test component)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  set(target test_${component})
  foreach(source IN LISTS ARG_SOURCES)
    set_property(GLOBAL APPEND PROPERTY TDFX_TEST_SOURCES ${PROJECT_SOURCE_DIR}/tests/${source})
  endforeach()
  tdfx_add_executable(${target}
    SOURCES ${PROJECT_SOURCE_DIR}/tests/doctest_main.cpp ${ARG_SOURCES}
    DEPS doctest::doctest ${ARG_DEPS})
  # Tests build plain data (TensorMeta, ModuleBox, table rows) by aggregate initialisation,
  # leaving defaulted members out on purpose.
  target_compile_options(${target} PRIVATE -Wno-missing-field-initializers)
  # The configured paths come from one generated object (tdfx_test_paths), not from compile
  # definitions: a definition holding the clone's path would make every test object differ
  # between clones, and ccache would compile them all again in each clean clone.
  target_link_libraries(${target} PRIVATE tdfx_test_paths)
  add_test(NAME ${target} COMMAND ${target})
  set(environment "TDFX_SOURCE_DIR=${PROJECT_SOURCE_DIR};TDFX_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  if(TDFX_SANITIZE)
    # Third-party libraries' process-lifetime allocations are not tdfx's leaks.
    list(APPEND environment "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0")
  endif()
  set_tests_properties(${target} PROPERTIES ENVIRONMENT "${environment}")
endfunction()

# Fails the configuration when a doctest file under tests/ (`test_*.cpp`) is in no test binary:
# a test file left out of every tdfx_add_test would otherwise stop running without a word.
# Called once, after every tdfx_add_test.
function(tdfx_check_test_sources)
  file(GLOB_RECURSE written CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/*/test_*.cpp)
  get_property(built GLOBAL PROPERTY TDFX_TEST_SOURCES)
  foreach(source IN LISTS written)
    if(NOT source IN_LIST built)
      message(FATAL_ERROR "${source} is in no test binary: add it to a tdfx_add_test in "
                          "tests/CMakeLists.txt")
    endif()
  endforeach()
endfunction()
