#include "data/pretokenize.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace anneal {
namespace {

std::vector<std::string> Pieces(std::string_view s) {
  std::vector<std::string> out;
  ForEachPiece(s, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

using V = std::vector<std::string>;

TEST(PretokenizeTest, WordsKeepTheirLeadingSpace) {
  EXPECT_EQ(Pieces("Hello world! The fox."), (V{"Hello", " world", "!", " The", " fox", "."}));
}

TEST(PretokenizeTest, Contractions) {
  EXPECT_EQ(Pieces("it's we're I'll they'd"), (V{"it", "'s", " we", "'re", " I", "'ll", " they", "'d"}));
  // Only lowercase contractions are special; 'S is punctuation then a letter run.
  EXPECT_EQ(Pieces("IT'S"), (V{"IT", "'", "S"}));
  EXPECT_EQ(Pieces("!'s"), (V{"!'", "s"}));
}

TEST(PretokenizeTest, WhitespaceGivesBackOneCharacterBeforeAWord) {
  EXPECT_EQ(Pieces("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(Pieces("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Pieces("a \n b"), (V{"a", " \n", " b"}));
  EXPECT_EQ(Pieces("end   "), (V{"end", "   "}));
  EXPECT_EQ(Pieces("\tx"), (V{"\t", "x"}));
}

TEST(PretokenizeTest, NumbersAndPunctuationRuns) {
  EXPECT_EQ(Pieces("in 2024, 3.14!!"), (V{"in", " 2024", ",", " 3", ".", "14", "!!"}));
  EXPECT_EQ(Pieces("<|endoftext|>"), (V{"<|", "endoftext", "|>"}));
}

TEST(PretokenizeTest, UnicodeClasses) {
  // é is a letter, 中文 letters, U+3000 whitespace, emoji "other".
  EXPECT_EQ(Pieces("caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87\xE3\x80\x80x \xF0\x9F\x98\x80"),
            (V{"caf\xC3\xA9", " \xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x80", "x", " \xF0\x9F\x98\x80"}));
}

}  // namespace
}  // namespace anneal
