#include "data/utf8.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

TEST(Utf8Test, ClassesOfKnownCharacters) {
  EXPECT_EQ(ClassOf('a'), CharClass::kLetter);
  EXPECT_EQ(ClassOf(0x00E9), CharClass::kLetter);   // é
  EXPECT_EQ(ClassOf(0x4E2D), CharClass::kLetter);   // 中
  EXPECT_EQ(ClassOf('7'), CharClass::kNumber);
  EXPECT_EQ(ClassOf(0x0663), CharClass::kNumber);   // Arabic-Indic three
  EXPECT_EQ(ClassOf(0x00BD), CharClass::kNumber);   // ½ (No)
  EXPECT_EQ(ClassOf(0x2167), CharClass::kNumber);   // Roman numeral eight (Nl)
  EXPECT_EQ(ClassOf(' '), CharClass::kSpace);
  EXPECT_EQ(ClassOf(0x0085), CharClass::kSpace);    // NEL is White_Space
  EXPECT_EQ(ClassOf(0x3000), CharClass::kSpace);    // ideographic space
  EXPECT_EQ(ClassOf(0xFEFF), CharClass::kOther);    // BOM is not White_Space
  EXPECT_EQ(ClassOf(0x0301), CharClass::kOther);    // combining acute (Mn)
  EXPECT_EQ(ClassOf(0x1F600), CharClass::kOther);   // emoji
  EXPECT_EQ(ClassOf('!'), CharClass::kOther);
  EXPECT_EQ(ClassOf(0x10FFFF), CharClass::kOther);
  // The table is Unicode 16.0, tiktoken's version: letters first assigned in Unicode 17 (CJK
  // Extension J, U+323B0..) are still "other" there, and must be here.
  EXPECT_EQ(ClassOf(0x323B0), CharClass::kOther);
  EXPECT_EQ(ClassOf(0x30000), CharClass::kLetter);  // CJK Extension G (Unicode 13)
}

TEST(Utf8Test, DecodesAllLengths) {
  std::string s = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";
  uint32_t cp;
  size_t len;
  ASSERT_TRUE(DecodeUtf8(s, 0, &cp, &len));
  EXPECT_EQ(cp, 'a');
  ASSERT_TRUE(DecodeUtf8(s, 1, &cp, &len));
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(len, 2u);
  ASSERT_TRUE(DecodeUtf8(s, 3, &cp, &len));
  EXPECT_EQ(cp, 0x4E2Du);
  ASSERT_TRUE(DecodeUtf8(s, 6, &cp, &len));
  EXPECT_EQ(cp, 0x1F600u);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(FindInvalidUtf8(s), std::string::npos);
}

TEST(Utf8Test, RejectsOverlongsSurrogatesAndTruncation) {
  EXPECT_EQ(FindInvalidUtf8("ok\xC0\xAF"), 2u);          // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("\xED\xA0\x80"), 0u);        // surrogate D800
  EXPECT_EQ(FindInvalidUtf8("ab\xE4\xB8"), 2u);          // truncated
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);    // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("\xFF"), 0u);
}

TEST(Utf8Test, ReplacementFollowsWhatwgMaximalSubparts) {
  // Same results as new TextDecoder().decode() in Node (what tiktoken in JavaScript sees).
  EXPECT_EQ(ReplaceInvalidUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(ReplaceInvalidUtf8("\xE4\xB8" "x"), "\xEF\xBF\xBD" "x");              // one U+FFFD for a truncated sequence
  EXPECT_EQ(ReplaceInvalidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");           // two for an overlong
  EXPECT_EQ(ReplaceInvalidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(ReplaceInvalidUtf8("\xF0\x9F\x98"), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace anneal
