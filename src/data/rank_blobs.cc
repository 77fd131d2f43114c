// Embeds the tiktoken encodings' rank files as read-only data (paths from CMake; data/rank_files.cc
// parses them): npm tiktoken's encoders/cl100k_base.json and o200k_base.json whole, and of
// llama3-tokenizer-js's src/data-converted.js only its vocabulary statement
// (`llama_vocab_base64 = "..."`: CMake finds its offset and length; the file's merges are not needed).
#if !defined(ANNEAL_CL100K_BASE_JSON_PATH) || !defined(ANNEAL_O200K_BASE_JSON_PATH) || \
    !defined(ANNEAL_LLAMA3_DATA_JS_PATH) || !defined(ANNEAL_LLAMA3_VOCAB_SKIP) || !defined(ANNEAL_LLAMA3_VOCAB_COUNT)
#error "CMake must name the rank files (ANNEAL_*_PATH) and the Llama 3 vocabulary's place"
#endif

#define ANNEAL_STR2(x) #x
#define ANNEAL_STR(x) ANNEAL_STR2(x)
#define ANNEAL_INCBIN(sym, what)  \
  asm(".section .rodata\n"        \
      ".global " #sym "\n"        \
      ".global " #sym "_end\n"    \
      #sym ":\n"                  \
      ".incbin " what "\n"        \
      #sym "_end:\n"              \
      ".byte 0\n"                 \
      ".previous\n")

ANNEAL_INCBIN(anneal_cl100k_base_json, "\"" ANNEAL_CL100K_BASE_JSON_PATH "\"");
ANNEAL_INCBIN(anneal_o200k_base_json, "\"" ANNEAL_O200K_BASE_JSON_PATH "\"");
ANNEAL_INCBIN(anneal_llama3_vocab_js, "\"" ANNEAL_LLAMA3_DATA_JS_PATH "\", " ANNEAL_STR(ANNEAL_LLAMA3_VOCAB_SKIP) ", " ANNEAL_STR(
                                          ANNEAL_LLAMA3_VOCAB_COUNT));
