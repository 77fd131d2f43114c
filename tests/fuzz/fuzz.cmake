# The fuzz harnesses (tests/fuzz/*_fuzz.cc, issue 37): one libFuzzer executable each under the fuzz
# preset (ANNEAL_LIBFUZZER: clang, -fsanitize=fuzzer,address,undefined; bench/fuzz.sh runs them),
# and otherwise one plain replay program whose fuzz.<name> tests feed each harness its committed
# corpus in the unit tier (so the release and ASan builds check every seed and every past finding).
set(ANNEAL_FUZZ_HARNESSES job_spec train_config safetensors data_headers wire launch_messages sigv4 tokenizer
    hf_config s3_xml api prometheus store checkpoint_manifest trace launch_rsh cli_replies)
if(ANNEAL_LIBFUZZER)
  foreach(h ${ANNEAL_FUZZ_HARNESSES})
    add_executable(fuzz_${h} ${CMAKE_CURRENT_LIST_DIR}/${h}_fuzz.cc)
    target_include_directories(fuzz_${h} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
    target_compile_definitions(fuzz_${h} PRIVATE ANNEAL_LIBFUZZER)
    target_link_options(fuzz_${h} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(fuzz_${h} PRIVATE anneal_lib anneal_cli)
  endforeach()
  return()
endif()
set(_fuzz_sources ${ANNEAL_FUZZ_HARNESSES})
list(TRANSFORM _fuzz_sources APPEND _fuzz.cc)
list(TRANSFORM _fuzz_sources PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
add_executable(anneal_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/replay_main.cc ${_fuzz_sources})
target_include_directories(anneal_fuzz_replay PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(anneal_fuzz_replay PRIVATE anneal_lib anneal_cli)
foreach(h ${ANNEAL_FUZZ_HARNESSES})
  add_test(NAME fuzz.${h} COMMAND anneal_fuzz_replay ${h} ${CMAKE_CURRENT_LIST_DIR}/corpus/${h})
  set_tests_properties(fuzz.${h} PROPERTIES LABELS unit)
endforeach()
# Every harness file is in the list above, and has a corpus (a harness left out would never run).
string(REPLACE ";" " " _fuzz_names "${ANNEAL_FUZZ_HARNESSES}")
add_test(NAME fuzz.every_harness_listed
         COMMAND bash -c "cd ${CMAKE_CURRENT_LIST_DIR} && diff <(ls *_fuzz.cc | sed 's/_fuzz.cc$//' | sort) \
                          <(printf '%s\\n' ${_fuzz_names} | sort) && diff <(ls corpus) <(printf '%s\\n' ${_fuzz_names} | sort)")
set_tests_properties(fuzz.every_harness_listed PROPERTIES LABELS unit)
