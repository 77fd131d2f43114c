#include "storage/object_store.h"

#include <gtest/gtest.h>

#include "storage/object_store_conformance.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

TEST(ObjectStoreTest, FileBackendConformance) {
  testing::TempDir dir;
  auto s = OpenObjectStore("file://" + dir.path() + "/store");
  ASSERT_TRUE(s.ok()) << s.status().message();
  RunObjectStoreConformance(**s);
  EXPECT_EQ((*s)->Describe(), "file://" + dir.path() + "/store");
}

// A writer that died before its rename leaves a temporary file: never listed, never an object.
TEST(ObjectStoreTest, FileBackendHidesTemporaryFiles) {
  testing::TempDir dir;
  auto s = OpenObjectStore(dir.path());
  ASSERT_TRUE(s.ok());
  dir.Write("ckpt/model.bin.tmp.123.4", "partial");
  ASSERT_TRUE((*s)->Put("ckpt/other.bin", "whole").ok());
  auto all = (*s)->ListAll("ckpt/");
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].key, "ckpt/other.bin");
}

TEST(ObjectStoreTest, UnsupportedSchemeIsBadInput) {
  auto s = OpenObjectStore("gs://bucket/x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidInput);
  EXPECT_NE(s.status().message().find("file:///"), std::string::npos);
}

TEST(ObjectStoreTest, FaultStoreFailsTheNthOperation) {
  testing::TempDir dir;
  auto base = OpenObjectStore(dir.path());
  ASSERT_TRUE(base.ok());
  FaultObjectStore f(base->get());
  f.FailNth(FaultObjectStore::Op::kPut, 2, PeerError("injected 503 SlowDown"));
  EXPECT_TRUE(f.Put("a", "1").ok());
  Status second = f.Put("b", "2");
  EXPECT_EQ(second.code(), Code::kPeer);
  EXPECT_TRUE(f.Put("c", "3").ok());
  EXPECT_FALSE((*base)->Head("b")->has_value());  // the failed put left nothing
  EXPECT_EQ(f.calls(FaultObjectStore::Op::kPut), 3);
  EXPECT_EQ(*f.Get("c", 0, ObjectStore::kToEnd), "3");
}

TEST(ObjectStoreTest, MalformedUrisAreRefusedWithTheFix) {
  for (const char* uri : {"s3:/bucket/x", "s3:bucket", "ftp://host/x"}) {
    auto s = OpenObjectStore(uri);
    ASSERT_FALSE(s.ok()) << uri;
    EXPECT_EQ(s.status().ExitCode(), 2) << uri;
  }
  EXPECT_NE(OpenObjectStore("s3:/bucket/x").status().message().find("s3://bucket/prefix (two slashes)"),
            std::string::npos);
  EXPECT_FALSE(Env::Default().Exists("s3:"));  // no folder named after the mistake
}

}  // namespace
}  // namespace anneal
