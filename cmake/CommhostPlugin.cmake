# SPDX-License-Identifier: Apache-2.0
# commhost_add_plugin(NAME name SOURCES src... [LIBRARIES lib...] [OUTPUT_DIR dir] [INSTALL])
# Builds one plugin as a loadable module named libcommhost_<name>.so.
# Used in-tree and by third-party plugins through find_package(commhost CONFIG).
include(GNUInstallDirs)
function(commhost_add_plugin)
  cmake_parse_arguments(P "INSTALL" "NAME;OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT P_NAME OR NOT P_SOURCES)
    message(FATAL_ERROR "commhost_add_plugin needs NAME and SOURCES")
  endif()
  set(target commhost_plugin_${P_NAME})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE commhost::plugin_sdk ${P_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME commhost_${P_NAME}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(P_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIR})
  elseif(COMMHOST_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${COMMHOST_PLUGIN_OUTPUT_DIR})
  endif()
  if(P_INSTALL)
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/commhost/plugins)
  endif()
endfunction()
