# The CUDA kernels (and NCCL) on a GPU, in the full build and the slim one alike: labels unit and
# needs-gpu — reported skipped where there is no GPU, never passed, and the only skips the suite
# accepts (scripts/run_tests.sh). The tests are listed from the sources at configure time
# (gtest_add_tests): gtest_discover_tests's PROPERTIES cannot carry a list of two labels.
if(ANNEAL_WITH_CUDA_KERNELS)
  add_executable(anneal_cuda_tests kernels/cuda_elementwise_test.cc kernels/cuda_flash_test.cc)
  if(ANNEAL_WITH_NCCL)  # NCCL on the GPU, one rank
    target_sources(anneal_cuda_tests PRIVATE comm/nccl_gpu_test.cc)
  endif()
  target_include_directories(anneal_cuda_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(anneal_cuda_tests PRIVATE anneal_kernels_cuda anneal_lib GTest::gtest GTest::gtest_main)
  gtest_add_tests(TARGET anneal_cuda_tests TEST_LIST anneal_cuda_test_names)
  set_tests_properties(${anneal_cuda_test_names} PROPERTIES LABELS "unit;needs-gpu"
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endif()
