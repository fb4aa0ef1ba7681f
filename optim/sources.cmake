# optim/: optimizers, gradient clipping, learning-rate schedules (included by the top-level
# CMakeLists.txt, which builds them into both xgrad and xgrad_f64).
list(APPEND XGRAD_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory_report.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sgd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/adam.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clip_grad.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lr_scheduler.cpp
)
