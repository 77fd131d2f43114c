# The slim build (-DANNEAL_SLIM=ON, issue 18): kernels (ref and CUDA), model, optimizer, trainer on
# token-file data with JSON configs, and the parity and step tests — needing no Debian library, so
# it builds where only a compiler, CMake and the CUDA toolkit exist (the lent GPU machine's fallback
# when the bundle does not load). Header-only dependencies (nlohmann/json, CLI11, xxHash inlined) and
# GoogleTest's sources come from ANNEAL_THIRD_PARTY (the bundle carries them: scripts/gpu_bundle.sh),
# else from the system. Left out: S3 (libcurl, OpenSSL), Gloo (one rank per process group only),
# YAML, the text input and prep (zlib), the optimized CPU kernels (OpenBLAS), the control plane.
set(ANNEAL_THIRD_PARTY "" CACHE PATH "folder with nlohmann/, CLI/, xxhash.h, googletest/ and encoder.json")
set(_tp_hints)
if(ANNEAL_THIRD_PARTY)
  set(_tp_hints HINTS ${ANNEAL_THIRD_PARTY} NO_DEFAULT_PATH)
  if(EXISTS ${ANNEAL_THIRD_PARTY}/encoder.json)  # GPT-2's vocabulary (the slim build embeds it alone)
    set(ANNEAL_GPT2_ENCODER_JSON ${ANNEAL_THIRD_PARTY}/encoder.json CACHE FILEPATH "" FORCE)
  endif()
endif()
find_path(ANNEAL_JSON_INCLUDE nlohmann/json.hpp ${_tp_hints} REQUIRED)
find_path(ANNEAL_CLI11_INCLUDE CLI/CLI.hpp ${_tp_hints} REQUIRED)
find_path(XXHASH_INCLUDE xxhash.h ${_tp_hints} REQUIRED)
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
target_include_directories(nlohmann_json::nlohmann_json INTERFACE ${ANNEAL_JSON_INCLUDE})
add_library(CLI11::CLI11 INTERFACE IMPORTED)
target_include_directories(CLI11::CLI11 INTERFACE ${ANNEAL_CLI11_INCLUDE})
set(XXHASH_LIB "")  # xxHash's functions inlined into each user (XXH_INLINE_ALL, set on them)
# GoogleTest built from its sources (Debian's /usr/src/googletest, or the bundle's copy).
find_path(ANNEAL_GTEST_SOURCE CMakeLists.txt PATHS ${ANNEAL_THIRD_PARTY}/googletest /usr/src/googletest NO_DEFAULT_PATH)
message(STATUS "anneal: slim build (headers from ${ANNEAL_JSON_INCLUDE}, ${ANNEAL_CLI11_INCLUDE}, ${XXHASH_INCLUDE}; "
               "GoogleTest from ${ANNEAL_GTEST_SOURCE})")
