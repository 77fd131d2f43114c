// Reading prep's inputs: plain text or JSON Lines, optionally gzipped; the UTF-8 policy; and encoding
// a long text on several threads with the same ids as one thread.
//
// Documents (docs/formats/dataset.md): a plain text file is one document; in JSON Lines each
// non-empty line is an object whose "text" string is one document. A file ending in .gz is gunzipped
// first. Formats are chosen by name: *.jsonl, *.jsonl.gz, *.json, *.json.gz are JSON Lines;
// everything else is text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/tokenizer.h"

namespace anneal {

enum class InputFormat { kText, kJsonLines };

InputFormat FormatOfPath(const std::string& path);
bool IsGzipPath(const std::string& path);

// Checks that *s is valid UTF-8. With replace, rewrites invalid sequences to U+FFFD and succeeds;
// otherwise fails naming `what`, the byte offset and the --invalid-utf8 replace fix.
Status CheckUtf8(const std::string& what, std::string* s, bool replace);

// Reads bytes [begin, end) of path; for a .gz file reads and gunzips the whole file (begin/end are
// then ignored). Fails with the path and the fix on unreadable or corrupt gzip data.
Result<std::string> ReadInputBytes(Env& env, const std::string& path, uint64_t begin, uint64_t end);

// Calls fn for each document in data (the bytes of one segment of path, starting at byte
// base_offset of the file). JSON Lines errors name path and the byte offset of the line.
Status ForEachDocument(InputFormat format, const std::string& path, uint64_t base_offset, std::string data,
                       bool replace_invalid_utf8, const std::function<void(std::string_view)>& fn);

// Encodes text on `threads` threads, each taking a run of whole lines. The ids equal one-thread
// encoding: the text is cut only where the pre-tokenizer always ends a piece (see the .cc).
Status EncodeParallel(const Tokenizer& tok, std::string_view text, int threads, std::vector<uint32_t>* out);

}  // namespace anneal
