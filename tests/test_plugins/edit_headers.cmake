# SPDX-License-Identifier: Apache-2.0
# Copies commhost's public headers to OUT_DIR and inserts one virtual function into
# Backend, before allreduce, then writes that copy's interface hashes beside it: the
# headers other_vtable.cc is built against (an edited or stale copy, as a plugin author
# might have). Run as: cmake -DSRC_DIR=<host/include> -DOUT_DIR=<dir> -P edit_headers.cmake
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/InterfaceHashes.cmake)
file(REMOVE_RECURSE "${OUT_DIR}/commhost")
file(COPY "${SRC_DIR}/commhost" DESTINATION "${OUT_DIR}")
set(header "${OUT_DIR}/commhost/sdk/backend.h")
file(READ "${header}" text)
set(anchor "  virtual WorkPtr allreduce(const OpContext& ctx")
string(FIND "${text}" "${anchor}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "edit_headers: Backend::allreduce's declaration is not in ${header}; update the anchor")
endif()
string(REPLACE "${anchor}" "  virtual void addedElsewhere() {}\n${anchor}" text "${text}")
file(WRITE "${header}" "${text}")
commhost_write_interface_hashes("${OUT_DIR}/commhost/sdk/interface_hashes.h" "${OUT_DIR}")
file(TOUCH "${OUT_DIR}/stamp")
