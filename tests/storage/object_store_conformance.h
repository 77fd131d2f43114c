// The ObjectStore conformance suite: the cases every backend must pass, run on file://
// (tests/storage/object_store_test.cc) and on a live S3 server (tests/storage/s3_conformance.cc).
// Expects an empty store (or prefix).
#pragma once

#include <gtest/gtest.h>

#include "storage/object_store.h"

namespace anneal {

// The conformance cases every backend must pass (file:// here; s3:// against radosgw and s3rver with
// the S3 client).
inline void RunObjectStoreConformance(ObjectStore& s) {
  ASSERT_TRUE(s.Put("ckpt/step-1/model.bin", "0123456789").ok());
  ASSERT_TRUE(s.Put("ckpt/step-1/manifest.json", "{}").ok());
  ASSERT_TRUE(s.Put("ckpt/step-2/model.bin", "abc").ok());
  ASSERT_TRUE(s.Put("data.txt", "x").ok());
  EXPECT_EQ(*s.Get("ckpt/step-1/model.bin"), "0123456789");
  EXPECT_EQ(*s.Get("ckpt/step-1/model.bin", 3, 4), "3456");
  EXPECT_EQ(*s.Get("ckpt/step-1/model.bin", 8), "89");  // to the end
  EXPECT_EQ(s.Get("ckpt/step-1/model.bin", 11).status().code(), Code::kInvalidInput);
  auto missing = s.Get("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  // Head, and an overwrite changes size and etag.
  auto h = s.Head("ckpt/step-2/model.bin");
  ASSERT_TRUE(h.ok() && h->has_value());
  EXPECT_EQ((*h)->size, 3u);
  ASSERT_TRUE(s.Put("ckpt/step-2/model.bin", "abcd").ok());
  auto h2 = s.Head("ckpt/step-2/model.bin");
  EXPECT_EQ((*h2)->size, 4u);
  EXPECT_NE((*h2)->etag, (*h)->etag);
  EXPECT_FALSE(s.Head("ckpt/none")->has_value());
  // Listing: key order, prefix, pagination.
  auto p1 = s.List("ckpt/", "", 2);
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(p1->objects.size(), 2u);
  EXPECT_EQ(p1->objects[0].key, "ckpt/step-1/manifest.json");
  EXPECT_EQ(p1->objects[1].key, "ckpt/step-1/model.bin");
  ASSERT_FALSE(p1->next.empty());
  auto p2 = s.List("ckpt/", p1->next, 2);
  ASSERT_EQ(p2->objects.size(), 1u);
  EXPECT_EQ(p2->objects[0].key, "ckpt/step-2/model.bin");
  EXPECT_TRUE(p2->next.empty());
  EXPECT_EQ(s.ListAll("ckpt/step-1")->size(), 2u);
  EXPECT_EQ(s.ListAll("")->size(), 4u);
  EXPECT_TRUE(s.ListAll("zzz")->empty());
  // Delete, twice (the second is not an error).
  ASSERT_TRUE(s.Delete("data.txt").ok());
  ASSERT_TRUE(s.Delete("data.txt").ok());
  EXPECT_FALSE(s.Head("data.txt")->has_value());
  // Bad keys are bad input, named.
  for (const char* k : {"", "/abs", "a/../b", "a//b", "dir/"}) {
    Status st = s.Put(k, "x");
    EXPECT_EQ(st.code(), Code::kInvalidInput) << k;
  }
}

}  // namespace anneal
