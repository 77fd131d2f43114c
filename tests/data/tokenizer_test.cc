#include "data/tokenizer.h"

#include <gtest/gtest.h>

#include "data/pretokenize.h"
#include "data/text_input.h"

namespace anneal {
namespace {

using Ids = std::vector<uint32_t>;

const Tokenizer& Gpt2() {
  static const Tokenizer* tok = Tokenizer::Load("gpt2").value().release();
  return *tok;
}

Ids Encode(std::string_view s) {
  Ids out;
  Gpt2().NewEncoder()->Encode(s, &out);
  return out;
}

// Expected ids were produced by tiktoken's get_encoding('gpt2').encode(s, [], []); the peers tier
// compares against tiktoken itself on megabytes of text.
TEST(TokenizerTest, MatchesTiktokenOnKnownStrings) {
  EXPECT_EQ(Encode("Hello world! The quick brown fox."), (Ids{15496, 995, 0, 383, 2068, 7586, 21831, 13}));
  EXPECT_EQ(Encode("caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80!"),
            (Ids{66, 1878, 2634, 220, 40792, 23877, 229, 30325, 222, 0}));
  EXPECT_EQ(Encode("   leading spaces\n\n\ttabs"), (Ids{220, 220, 3756, 9029, 628, 197, 8658, 82}));
  EXPECT_EQ(Encode("it's 2024"), (Ids{270, 338, 48609}));
}

TEST(TokenizerTest, EndOfTextInTextIsOrdinaryText) {
  EXPECT_EQ(Encode("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(Gpt2().eot(), 50256u);
  EXPECT_EQ(Gpt2().vocab_size(), 50257u);
}

TEST(TokenizerTest, DecodeRoundTripsBytes) {
  std::string s = "Mixed: \xCE\xB1\xCE\xB2\xCE\xB3, \xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB and  spaces\n";
  EXPECT_EQ(Gpt2().Decode(Encode(s)), s);
}

TEST(TokenizerTest, CacheGivesSameIdsAsUncached) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the cat sat on the mat " + std::to_string(i * 7919) + " times. ";
  Ids cached;
  auto enc = Gpt2().NewEncoder();
  enc->Encode(text, &cached);
  enc->Encode(text, &cached);  // second pass hits the cache
  // Piece by piece through the BPE merge loop, without any cache.
  Ids uncached;
  for (int pass = 0; pass < 2; ++pass) {
    ForEachPiece(text, [&](std::string_view p) { Gpt2().EncodePiece(p, &uncached); });
  }
  EXPECT_EQ(cached, uncached);
}

TEST(TokenizerTest, LongPieceIsMergedCorrectly) {
  // 1000 spaces before a word: one long whitespace piece merged by BPE, then " x".
  std::string s(1000, ' ');
  s += "x";
  Ids ids = Encode(s);
  EXPECT_EQ(Gpt2().Decode(ids), s);
  EXPECT_EQ(ids.back(), Encode(" x").back());
}

TEST(TokenizerTest, ParallelEncodingEqualsSerial) {
  // Line ends of every kind around the cut points: blank lines, trailing spaces, tabs, CRLF.
  const char* ends[] = {"\n", "\n\n", " \n", "\t\n", "\r\n", "\n\n\n", "  \n\n"};
  std::string text;
  for (int i = 0; i < 6000; ++i) {
    text += std::string(i % 5 == 0 ? "  " : "") + "Line " + std::to_string(i) + " of the text, with words." +
            ends[i % 7];
  }
  Ids serial;
  Gpt2().NewEncoder()->Encode(text, &serial);
  for (int threads = 2; threads <= 9; ++threads) {
    Ids parallel;
    ASSERT_TRUE(EncodeParallel(Gpt2(), text, threads, &parallel).ok());
    EXPECT_EQ(serial, parallel) << threads << " threads";
  }
}

TEST(TokenizerTest, UnknownTokenizerNamesTheFix) {
  auto r = Tokenizer::Load("/nonexistent/vocab");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("gpt2"), std::string::npos);
}

}  // namespace
}  // namespace anneal
