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

template <PreTokenizer R>
V PiecesOf(std::string_view s) {
  V out;
  ForEachPiece<R>(s, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}
const auto Cl100k = PiecesOf<PreTokenizer::kCl100k>;
const auto O200k = PiecesOf<PreTokenizer::kO200k>;

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

// The expected pieces are what Python's regex module (tiktoken's semantics) finds with each pattern;
// the peers tier compares whole corpora against tiktoken itself.
TEST(PretokenizeCl100kTest, ContractionsAnyCaseAndLongS) {
  EXPECT_EQ(Cl100k("it's WE'RE I'LL x'\u017f"), (V{"it", "'s", " WE", "'RE", " I", "'LL", " x", "'\u017f"}));
}

TEST(PretokenizeCl100kTest, PrefixedWordsNumbersInThreesPunctuationWithNewlines) {
  EXPECT_EQ(Cl100k("(hello \tworld 12345 !!\n\n x"),
            (V{"(hello", " ", "\tworld", " ", "123", "45", " !!\n\n", " x"}));
  EXPECT_EQ(Cl100k("path/to/file//\n ok"), (V{"path", "/to", "/file", "//\n", " ok"}));
}

TEST(PretokenizeCl100kTest, WhitespaceUpToTheLastNewline) {
  EXPECT_EQ(Cl100k("a   b\r\n\r\n  c  "), (V{"a", "  ", " b", "\r\n\r\n", " ", " c", "  "}));
}

TEST(PretokenizeCl100kTest, MarksAreNotLetters) {
  EXPECT_EQ(Cl100k("e\u0301E\u0301 \u01c5emal \u02b0ello"),
            (V{"e", "\u0301E", "\u0301", " \u01c5emal", " \u02b0ello"}));
}

TEST(PretokenizeO200kTest, SplitsAtCaseChangesAndKeepsContractions) {
  EXPECT_EQ(O200k("HelloWorld iPHONE XMLHttpRequest McDONALD'S"),
            (V{"Hello", "World", " i", "PHONE", " XMLHttp", "Request", " Mc", "DONALD'S"}));
  EXPECT_EQ(O200k("it's WE'RE I'LL x'\u017f"), (V{"it's", " WE'RE", " I'LL", " x'\u017f"}));
}

TEST(PretokenizeO200kTest, MarksJoinLettersOfEitherCase) {
  EXPECT_EQ(O200k("e\u0301E\u0301 \u01c5emal \u02b0ello"), (V{"e\u0301", "E\u0301", " \u01c5emal", " \u02b0ello"}));
}

TEST(PretokenizeO200kTest, SlashesAndNewlinesEndPunctuation) {
  EXPECT_EQ(O200k("path/to/file//\n ok"), (V{"path", "/to", "/file", "//\n", " ok"}));
  EXPECT_EQ(O200k("a   b\r\n\r\n  c  "), (V{"a", "  ", " b", "\r\n\r\n", " ", " c", "  "}));
}

}  // namespace
}  // namespace anneal
