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
  EXPECT_EQ(Gpt2().bos(), 50256u);
  EXPECT_EQ(Gpt2().eos(), 50256u);
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

struct EncodingCase {
  const char* name;
  uint32_t vocab_size, bos, eos;
  Ids hello, mixed, russian;
};

// Expected ids from tiktoken (tests/peers/tiktoken_native.py --encoding NAME: native tiktoken with
// the npm rank files; llama3 as Meta's reference builds it).
const EncodingCase kEncodings[] = {
    {"cl100k_base", 100277, 100257, 100257, {9906, 1917, 0, 578, 4062, 14198, 39935, 13},
     {936, 59958, 73958, 17161, 91416, 0}, {54745, 28089, 8341, 11, 52770, 95369, 1506, 30}},
    {"o200k_base", 200019, 199999, 199999, {13225, 2375, 0, 623, 4853, 19705, 68347, 13},
     {66, 103112, 83711, 88038, 0}, {}},
    {"llama3", 128256, 128000, 128001, {9906, 1917, 0, 578, 4062, 14198, 39935, 13},
     {936, 59958, 73958, 17161, 91416, 0}, {54745, 28089, 8341, 11, 52770, 123936, 30}},
};

TEST(TokenizerTest, EmbeddedEncodingsMatchTiktoken) {
  for (const EncodingCase& c : kEncodings) {
    SCOPED_TRACE(c.name);
    auto tok = Tokenizer::Load(c.name);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    const Tokenizer& t = **tok;
    EXPECT_EQ(t.vocab_size(), c.vocab_size);
    EXPECT_EQ(t.bos(), c.bos);
    EXPECT_EQ(t.eos(), c.eos);
    EXPECT_TRUE(t.IsSpecial(c.eos));
    auto enc = t.NewEncoder();
    Ids hello, mixed, russian;
    enc->Encode("Hello world! The quick brown fox.", &hello);
    EXPECT_EQ(hello, c.hello);
    enc->Encode("caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80!", &mixed);
    EXPECT_EQ(mixed, c.mixed);
    if (!c.russian.empty()) {
      enc->Encode("\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBA\xD0\xB0\xD0\xBA "
                  "\xD0\xB4\xD0\xB5\xD0\xBB\xD0\xB0?",
                  &russian);
      EXPECT_EQ(russian, c.russian);
    }
    std::string s = "Mixed: \xCE\xB1\xCE\xB2\xCE\xB3, <|endoftext|> \xF0\x9F\x91\xA9 and  spaces\n";
    Ids ids;
    enc->Encode(s, &ids);
    EXPECT_EQ(t.Decode(ids), s);
    for (uint32_t id : ids) EXPECT_FALSE(t.IsSpecial(id));
  }
}

TEST(TokenizerTest, IdsWithoutTokensAndSpecialTokens) {
  auto cl = Tokenizer::Load("cl100k_base");
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ((*cl)->TokenBytes(100256), "");  // no token has this id
  EXPECT_EQ((*cl)->TokenBytes(100276), "<|endofprompt|>");
  EXPECT_EQ((*cl)->SpecialTokens().size(), 5u);
  auto llama = Tokenizer::Load("llama3");
  ASSERT_TRUE(llama.ok());
  auto specials = (*llama)->SpecialTokens();
  ASSERT_EQ(specials.size(), 256u);
  EXPECT_EQ(specials[9], (std::pair<std::string, uint32_t>{"<|eot_id|>", 128009}));
  EXPECT_EQ(specials[255], (std::pair<std::string, uint32_t>{"<|reserved_special_token_247|>", 128255}));
}

TEST(TokenizerTest, RankFilesThatAreNotTheExpectedOnesAreRejected) {
  auto r = Tokenizer::FromTiktokenJson(R"({"pat_str": "\\s+", "special_tokens": {}, "bpe_ranks": ""})", "x",
                                       PreTokenizer::kCl100k);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pattern"), std::string::npos) << r.status().message();
  EXPECT_FALSE(Tokenizer::FromTiktokenJson("[]", "x", PreTokenizer::kO200k).ok());
  EXPECT_FALSE(Tokenizer::FromLlama3Data("const x = 1;", "llama3").ok());
}

}  // namespace
}  // namespace anneal
