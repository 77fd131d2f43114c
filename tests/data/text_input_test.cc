#include "data/text_input.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "testing/temp_dir.h"

namespace anneal {
namespace {

std::vector<std::string> Docs(InputFormat f, const std::string& data, Status* st, bool replace = false) {
  std::vector<std::string> docs;
  *st = ForEachDocument(f, "in.jsonl", 0, data, replace, [&](std::string_view d) { docs.emplace_back(d); });
  return docs;
}

TEST(TextInputTest, FormatsByName) {
  EXPECT_EQ(FormatOfPath("a.jsonl"), InputFormat::kJsonLines);
  EXPECT_EQ(FormatOfPath("a.jsonl.gz"), InputFormat::kJsonLines);
  EXPECT_EQ(FormatOfPath("a.txt.gz"), InputFormat::kText);
  EXPECT_EQ(FormatOfPath("README"), InputFormat::kText);
  EXPECT_TRUE(IsGzipPath("x.gz"));
}

TEST(TextInputTest, JsonLinesDocuments) {
  Status st;
  auto docs = Docs(InputFormat::kJsonLines, "{\"text\":\"one\"}\n\n{\"text\":\"two\\nlines\",\"id\":3}\n{\"text\":\"\"}", &st);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(docs, (std::vector<std::string>{"one", "two\nlines"}));
}

TEST(TextInputTest, JsonLinesWithoutTextNamesTheField) {
  Status st;
  Docs(InputFormat::kJsonLines, "{\"text\":\"ok\"}\n{\"body\":\"x\"}\n", &st);
  EXPECT_EQ(st.ExitCode(), 2);
  EXPECT_NE(st.message().find("\"text\""), std::string::npos);
  EXPECT_NE(st.message().find("byte 14"), std::string::npos);
  Docs(InputFormat::kJsonLines, "not json\n", &st);
  EXPECT_EQ(st.ExitCode(), 2);
}

TEST(TextInputTest, InvalidUtf8RejectedOrReplaced) {
  Status st;
  Docs(InputFormat::kText, "ab\xFF", &st);
  EXPECT_EQ(st.ExitCode(), 2);
  EXPECT_NE(st.message().find("offset 2"), std::string::npos);
  EXPECT_NE(st.message().find("--invalid-utf8 replace"), std::string::npos);
  auto docs = Docs(InputFormat::kText, "ab\xFF", &st, /*replace=*/true);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(docs, (std::vector<std::string>{"ab\xEF\xBF\xBD"}));
}

TEST(TextInputTest, ReadsGzipAndRejectsCorruptGzip) {
  testing::TempDir dir;
  std::string text = "hello gzip world\n";
  uLongf cap = compressBound(static_cast<uLong>(text.size())) + 32;
  // Write a gzip stream with zlib's gz* API.
  std::string path = dir.File("a.txt.gz");
  gzFile gz = gzopen(path.c_str(), "wb");
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  (void)cap;
  auto r = ReadInputBytes(Env::Default(), path, 0, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, text);
  std::string bad = dir.Write("b.txt.gz", "\x1f\x8b\x08\x00garbage");
  auto rb = ReadInputBytes(Env::Default(), bad, 0, 0);
  ASSERT_FALSE(rb.ok());
  EXPECT_EQ(rb.status().ExitCode(), 2);
}

}  // namespace
}  // namespace anneal
