#include "data/utf8.h"

namespace anneal {

namespace {
#include "data/unicode_classes.inc"
}  // namespace

uint8_t ClassBitsOf(uint32_t cp) {
  if (cp >= 0x110000) return 0;
  return kUnicodeBlocks[kUnicodeBlockIndex[cp >> 8]][cp & 0xFF];
}

CharClass ClassOf(uint32_t cp) { return static_cast<CharClass>(ClassBitsOf(cp) & kClassMask); }

}  // namespace anneal
