# Writes OUT with ANNEAL_VERSION and ANNEAL_GIT_COMMIT; rewrites it only when the text changes, so a
# build with no new commit recompiles nothing.
execute_process(COMMAND git -C ${SRC} rev-parse --short=12 HEAD OUTPUT_VARIABLE commit
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
execute_process(COMMAND git -C ${SRC} status --porcelain --untracked-files=no OUTPUT_VARIABLE dirty
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT dirty STREQUAL "")
  set(commit "${commit}-dirty")
endif()
set(text "#pragma once\n#define ANNEAL_VERSION \"${VERSION}\"\n#define ANNEAL_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
