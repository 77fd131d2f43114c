# The CUDA kernels on a GPU (label needs-gpu: reported skipped where there is none, never passed),
# in the full build and the slim one alike.
if(ANNEAL_WITH_CUDA_KERNELS)
  add_executable(anneal_cuda_tests kernels/cuda_elementwise_test.cc kernels/cuda_flash_test.cc)
  target_include_directories(anneal_cuda_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(anneal_cuda_tests PRIVATE anneal_kernels_cuda anneal_lib GTest::gtest GTest::gtest_main)
  gtest_discover_tests(anneal_cuda_tests PROPERTIES LABELS "unit;needs-gpu" DISCOVERY_TIMEOUT 60)
endif()
