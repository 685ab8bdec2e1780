# Helpers shared by every component's CMakeLists.txt.

# tdfx_add_library(NAME SOURCES ... [DEPS ...]): the library tdfx_NAME with its
# alias tdfx::NAME, include paths from the repository root, and the torch
# precompiled header.
function(tdfx_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(tdfx_${name} ${ARG_SOURCES})
  add_library(tdfx::${name} ALIAS tdfx_${name})
  # Installed as tdfx::NAME too (see cmake/install.cmake).
  set_target_properties(tdfx_${name} PROPERTIES EXPORT_NAME ${name})
  set_property(GLOBAL APPEND PROPERTY TDFX_LIBRARIES tdfx_${name})
  target_include_directories(tdfx_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<INSTALL_INTERFACE:include/tdfx>)
  target_link_libraries(tdfx_${name} PUBLIC ${ARG_DEPS})
  target_compile_options(tdfx_${name} PRIVATE -Wall -Wextra)
  target_precompile_headers(tdfx_${name} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/torch_pch.h)
endfunction()

# tdfx_add_test(COMPONENT SOURCES ... [DEPS ...]): one doctest binary
# test_COMPONENT per component, registered with CTest.
function(tdfx_add_test component)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  set(target test_${component})
  add_executable(${target} ${PROJECT_SOURCE_DIR}/tests/doctest_main.cpp ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE doctest::doctest ${ARG_DEPS})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
  target_precompile_headers(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/torch_pch.h)
  target_compile_definitions(${target} PRIVATE TDFX_SOURCE_DIR_DEFAULT="${PROJECT_SOURCE_DIR}"
                                                TDFX_BIN_DIR_DEFAULT="${CMAKE_BINARY_DIR}/bin")
  add_test(NAME ${target} COMMAND ${target})
  set(environment "TDFX_SOURCE_DIR=${PROJECT_SOURCE_DIR};TDFX_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  if(TDFX_SANITIZE)
    # Third-party libraries' process-lifetime allocations are not tdfx's leaks.
    list(APPEND environment "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0")
  endif()
  set_tests_properties(${target} PROPERTIES ENVIRONMENT "${environment}")
endfunction()
