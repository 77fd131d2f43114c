# The slim build's tests (cmake/slim.cmake): GoogleTest from its sources; the kernels' host-side
# checks, the config reader and the parity harness (every registered backend against ref: cuda where
# a GPU is) in anneal_unit_tests, and the CUDA tests (needs-gpu) in anneal_cuda_tests — the two the
# device check runs.
set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
add_subdirectory(${ANNEAL_GTEST_SOURCE} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
foreach(t gtest gtest_main)  # GoogleTest's own code is not held to our -Werror (GCC 12's -Wrestrict in it)
  target_compile_options(${t} PRIVATE -Wno-error)
endforeach()
include(GoogleTest)
add_executable(anneal_unit_tests kernels/parity_test.cc kernels/cuda_math_test.cc kernels/cuda_launch_test.cc
               kernels/cuda_gemm_args_test.cc kernels/cuda_flash_plan_test.cc core/checksum_test.cc
               train/config_text_test.cc)
target_include_directories(anneal_unit_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${XXHASH_INCLUDE})
target_link_libraries(anneal_unit_tests PRIVATE anneal_lib GTest::gtest GTest::gtest_main)
gtest_discover_tests(anneal_unit_tests PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
include(cuda_tests.cmake)
