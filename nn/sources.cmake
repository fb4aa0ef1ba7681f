# Sources of xgrad::nn, appended to the library (included from the top-level CMakeLists.txt).
list(APPEND XGRAD_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/module.cpp
  ${CMAKE_CURRENT_LIST_DIR}/init.cpp
  ${CMAKE_CURRENT_LIST_DIR}/serialize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/activation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/normalization.cpp
  ${CMAKE_CURRENT_LIST_DIR}/feed_forward.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/linear.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lora.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lora_linear.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lora_embedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lora_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tying.cpp
  ${CMAKE_CURRENT_LIST_DIR}/positional.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention/detail/shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention/composed.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention/fused.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention/tiled.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention/cached.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kv_cache.cpp
  ${CMAKE_CURRENT_LIST_DIR}/generate.cpp
)
