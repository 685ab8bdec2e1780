# `cmake --install` lays out headers under include/tdfx, the libraries, the
# `tdfx` command, and a package config so that another project can write
#   find_package(tdfx REQUIRED)
#   target_link_libraries(app PRIVATE tdfx::tdfx)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# tdfx::tdfx: every component, for consumers that want the whole library.
add_library(tdfx_library INTERFACE)
add_library(tdfx::tdfx ALIAS tdfx_library)
get_property(tdfx_libraries GLOBAL PROPERTY TDFX_LIBRARIES)
target_link_libraries(tdfx_library INTERFACE ${tdfx_libraries})
set_target_properties(tdfx_library PROPERTIES EXPORT_NAME tdfx)

install(TARGETS ${tdfx_libraries} tdfx_library EXPORT tdfxTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The Graphviz plugins are linked in from their own folder (lib/graphviz), which the
# loader does not search: the installed command keeps the link-time folders as its RPATH,
# as the build-tree one does.
set_target_properties(tdfx PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS tdfx RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The Graphviz helper (viz/graphviz_helper.cpp) in libexec/tdfx, where an installed `tdfx`
# finds it (../libexec/tdfx from bin/), and a source file that gives a program linking the
# installed tdfx::viz the helper's absolute path (tdfxConfig.cmake adds it), written at
# install time so that it names the prefix installed to.
set_target_properties(tdfx-graphviz PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS tdfx-graphviz RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/tdfx)
install(CODE "
  set(helper \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBEXECDIR}/tdfx/tdfx-graphviz\")
  file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/tdfx/graphviz_helper_path.cpp\"
    \"// Written by cmake --install: where tdfx's Graphviz helper is.\\nextern \\\"C\\\" __attribute__((weak)) const char* tdfx_graphviz_helper_path() { return \\\"\${helper}\\\"; }\\n\")
")
# Headers: include/tdfx/COMPONENT/*.h and the umbrella include/tdfx/tdfx.h, the layout
# the build tree sees through <build>/include (cmake/tdfx.cmake).
# Internal headers stay in the build tree, by component: the tracer's recorder and the passes
# over a recording, the graph's compiled plan, module calls and operator table, the drawing
# helper process and subgraph grouping, the archive's parts (format constants, JSON writing and
# checks, graph and tensor readers, the module table, pickles, zip), the ONNX converter and its
# rules. No installed header includes them (tests/consumer/run.sh checks every installed
# header's includes).
set(TDFX_INTERNAL_tracer dispatch_recorder.h dispatch_trace.h dynamic_batch.h fx_view.h
                         leaf_calls.h lower_view.h method_calls.h name_scopes.h program_pass.h
                         state_restore.h traced_view.h)
set(TDFX_INTERNAL_graph plan.h module_call.h op_table.h)
set(TDFX_INTERNAL_viz helper_process.h subgraph_groups.h)
set(TDFX_INTERNAL_export archive_format.h archive_tensors.h graph_reader.h json_checks.h
                         module_table.h program_json.h tensor_pickle.h zip.h)
set(TDFX_INTERNAL_onnx converter.h rules)
set(TDFX_INTERNAL_debug grad_pass.h)
foreach(component ${TDFX_COMPONENTS})
  set(excluded)
  foreach(header ${TDFX_INTERNAL_${component}})
    list(APPEND excluded PATTERN ${header} EXCLUDE)
  endforeach()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${component}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tdfx FILES_MATCHING PATTERN "*.h" ${excluded})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/tdfx.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tdfx)
install(EXPORT tdfxTargets NAMESPACE tdfx:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tdfx)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tdfxConfig.cmake.in
  ${CMAKE_BINARY_DIR}/tdfxConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tdfx)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tdfxConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/tdfxConfig.cmake ${CMAKE_BINARY_DIR}/tdfxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tdfx)
