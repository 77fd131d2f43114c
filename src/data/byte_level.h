// GPT-2's byte-to-unicode alphabet (bytes_to_unicode in OpenAI's encoder.py): byte-level BPE files
// (encoder.json, vocab.json, merges.txt, tokenizer.json, llama3-tokenizer-js's vocabulary) write
// each byte of a token as one printable code point — the printable Latin-1 bytes as themselves, the
// others as 256, 257, ...
#pragma once

#include <string>
#include <string_view>

namespace anneal {

// Bytes -> their byte-level text (UTF-8).
std::string ByteLevelText(std::string_view bytes);

// Byte-level text -> its bytes; false (bytes unspecified) when text has a character outside the
// alphabet or is not UTF-8.
bool ByteLevelBytes(std::string_view text, std::string* bytes);

}  // namespace anneal
