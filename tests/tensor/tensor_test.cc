// src/tensor: dtypes and the bf16 conversion, devices, views, buffers.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/buffer.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/view.h"

namespace anneal {
namespace {

TEST(DTypeTest, SizesNamesAndParsing) {
  EXPECT_EQ(SizeOf(DType::kF32), 4u);
  EXPECT_EQ(SizeOf(DType::kBF16), 2u);
  EXPECT_EQ(SizeOf(DType::kI32), 4u);
  EXPECT_EQ(SizeOf(DType::kF64), 8u);
  EXPECT_EQ(ParseDType("bfloat16").value(), DType::kBF16);
  auto bad = ParseDType("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use f32 or bf16"), std::string::npos);
}

TEST(DTypeTest, Bf16RoundTripIsExactForBf16Values) {
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBf16(f), h) << h;
  }
  // Largest finite fp32 rounds up to infinity; a value just below half a step rounds down.
  EXPECT_TRUE(std::isinf(RoundToBf16(3.4028235e38f)));
  EXPECT_EQ(RoundToBf16(1.0f + 0.99f / 256), 1.0f);
  float x[3] = {1.0f + 1.0f / 256, -2.0f - 3.0f / 128, 0.0f};
  RoundFloatsToBf16(x, 3);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], -2.0f - 4.0f / 128);
}

TEST(DeviceTest, Parse) {
  EXPECT_TRUE(ParseDevice("cpu").value().is_cpu());
  EXPECT_EQ(ParseDevice("cuda:3").value(), Device::Cuda(3));
  EXPECT_EQ(ParseDevice("cuda").value().ToString(), "cuda:0");
  EXPECT_FALSE(ParseDevice("cuda:x").ok());
  EXPECT_FALSE(ParseDevice("gpu").ok());
}

TEST(TensorViewTest, ShapesStridesRowsAndReshape) {
  float data[24];
  for (int i = 0; i < 24; ++i) data[i] = static_cast<float>(i);
  TV v = TV::F32(data, {2, 3, 4});
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.stride(0), 12);
  EXPECT_EQ(v.stride(2), 1);
  EXPECT_TRUE(v.contiguous());
  TV r = v.Rows(1, 1);
  EXPECT_EQ(r.f32()[0], 12.0f);
  EXPECT_EQ(r.numel(), 12);
  TV m = v.Reshape({6, 4});
  EXPECT_EQ(m.dim(0), 6);
  TV cols = m.Strided({6, 2}, {4, 1});
  EXPECT_FALSE(cols.contiguous());
  EXPECT_EQ(v.ToString(), "f32[2, 3, 4] cpu");
  EXPECT_DEATH(v.bf16(), "");
}

TEST(BufferTest, HostBuffersAreZeroedAlignedAndMoveOnly) {
  auto b = Buffer::Make(HostAllocator(), 1000, "test");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 64, 0u);
  TV v = b->View(DType::kF32, {250});
  for (int i = 0; i < 250; ++i) EXPECT_EQ(v.f32()[i], 0.0f);
  Buffer moved = std::move(*b);
  EXPECT_EQ(b->data(), nullptr);
  EXPECT_EQ(moved.bytes(), 1000u);
  EXPECT_TRUE(Buffer::Make(HostAllocator(), 0, "empty")->data() == nullptr);
}

}  // namespace
}  // namespace anneal
