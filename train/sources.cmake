# train/: a whole training state in one file (state.cpp) and the data fingerprint it records
# (fingerprint.cpp), built into xgrad and xgrad_f64 (included from the top-level CMakeLists.txt).
list(APPEND XGRAD_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/fingerprint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/state.cpp
)
