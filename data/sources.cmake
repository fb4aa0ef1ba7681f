# Sources of xgrad::data (token data: the raw text, the character vocabulary, token shards, the
# window sampler), appended to the library (included from the top-level CMakeLists.txt).
# data/ uses core/ and io/ only.
list(APPEND XGRAD_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/text_source.cpp
  ${CMAKE_CURRENT_LIST_DIR}/vocab.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shards.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sampler.cpp
)
