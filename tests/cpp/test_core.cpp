// Core subsystems: dtypes and promotion, conversions, storage and views, allocator, dispatch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kiln/kiln.h"
#include "kiln/dispatch/schema.h"
#include "kiln/ops/composite.h"

using namespace kiln;

TEST(Dtype, ItemsizeAndNames) {
  EXPECT_EQ(itemsize(kBFloat16), 2u);
  EXPECT_EQ(itemsize(kComplex128), 16u);
  EXPECT_EQ(itemsize(kFloat8_e5m2), 1u);
  EXPECT_EQ(dtype_name(kFloat8_e4m3fn), "float8_e4m3fn");
}

TEST(Dtype, Promotion) {
  EXPECT_EQ(promote_types(kUInt8, kInt8), kInt16);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kFloat64, kComplex64), kComplex128);
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kUInt32, kFloat32), kFloat32);
  EXPECT_THROW(promote_types(kUInt32, kInt32), Error);
  EXPECT_THROW(promote_types(kFloat8_e4m3fn, kFloat32), Error);
}

TEST(Dtype, ResultTypeWithScalars) {
  Tensor i32 = zeros({3}, kInt32);
  Tensor f16 = zeros({3}, kFloat16);
  EXPECT_EQ(result_type(i32, scalar_tensor(Scalar(2.5), Dtype::Undefined, true)), kFloat32);
  EXPECT_EQ(result_type(i32, scalar_tensor(Scalar(int64_t(7)), Dtype::Undefined, true)), kInt32);
  EXPECT_EQ(result_type(f16, scalar_tensor(Scalar(1.0), kFloat64)), kFloat16);  // 0-dim float64 loses to dim f16
  EXPECT_EQ(result_type(i32, scalar_tensor(Scalar(1.0), kFloat64)), kFloat64);  // category raise
  EXPECT_EQ(result_type(zeros({2}, kBool), scalar_tensor(Scalar(int64_t(1)), Dtype::Undefined, true)), kInt64);
}

TEST(Convert, HalfRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    Half h = Half::from_bits(static_cast<uint16_t>(b));
    float f = h;
    if (std::isnan(f)) continue;
    EXPECT_EQ(Half(f).x, h.x) << b;
  }
  EXPECT_EQ(Half(65520.0f).x, 0x7c00);       // rounds to inf
  EXPECT_EQ(Half(65519.0f).x, 0x7bff);       // max finite
  EXPECT_EQ(BFloat16(1.00390625f).x, 0x3f80);  // ties to even
}

TEST(Convert, Float8AllCodes) {
  int nans = 0;
  for (int b = 0; b < 256; ++b) {
    float f = Float8_e4m3fn::from_bits(static_cast<uint8_t>(b));
    if (std::isnan(f)) {
      ++nans;
      continue;
    }
    EXPECT_EQ(Float8_e4m3fn(f).x, b);
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(Float8_e4m3fn(1000.0f).x, 0x7e);   // overflow saturates to 448, as torch 2.13 does
  EXPECT_EQ(Float8_e4m3fn(-INFINITY).x, 0xfe);
  EXPECT_EQ(Float8_e5m2(1e6f).x, 0x7c);              // overflow -> inf
}

TEST(Tensor, ViewsShareStorage) {
  Tensor a = arange(Scalar(0), Scalar(24), Scalar(1), kFloat32);
  Tensor v = a.view({2, 3, 4});
  EXPECT_EQ(v.storage().get(), a.storage().get());
  Tensor p = v.permute({2, 0, 1});
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  Tensor s = slice(v, 2, 1, std::nullopt, 2);
  EXPECT_EQ(s.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.storage_offset(), 1);
  EXPECT_FLOAT_EQ(s.select(0, 1).select(0, 2).select(0, 1).item<float>(), 23.0f);
  fill_(s, Scalar(-1));
  EXPECT_FLOAT_EQ(a.view({24}).select(0, 3).item<float>(), -1.0f);
  EXPECT_THROW(p.view({24}), Error);  // not viewable
  Tensor r = p.reshape({24});         // copies
  EXPECT_NE(r.storage().get(), a.storage().get());
}

TEST(Tensor, ZeroDimAndEmpty) {
  Tensor z = scalar_tensor(Scalar(3.5), kFloat64);
  EXPECT_EQ(z.dim(), 0);
  EXPECT_EQ(z.numel(), 1);
  EXPECT_DOUBLE_EQ(z.item<double>(), 3.5);
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(sum(e, Shape{0}).sizes(), (Shape{3}));
  EXPECT_THROW(max(e), Error);
}

TEST(Tensor, BadInputRaises) {
  Tensor a = zeros({2, 3});
  EXPECT_THROW(add(a, zeros({4})), Error);
  EXPECT_THROW(a.select(1, 3), Error);
  EXPECT_THROW(a.transpose(0, 2), Error);
  EXPECT_THROW(matmul(a, zeros({2, 3})), Error);
  try {
    matmul(a, zeros({2, 3}));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[mm]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gather(a, 1, full({2, 1}, Scalar(int64_t(9)), kInt64)), Error);
}

TEST(Allocator, StatsTrackPeak) {
  reset_peak_memory_stats();
  MemoryStats before = memory_stats();
  {
    Tensor big = empty({1 << 20}, kFloat32);
    MemoryStats during = memory_stats();
    EXPECT_GE(during.allocated_bytes - before.allocated_bytes, int64_t(4) << 20);
  }
  MemoryStats after = memory_stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_GE(after.peak_allocated_bytes - before.allocated_bytes, int64_t(4) << 20);
  // a second allocation of the same size reuses the cached block
  int64_t hits = after.cache_hits;
  Tensor again = empty({1 << 20}, kFloat32);
  EXPECT_EQ(memory_stats().cache_hits, hits + 1);
}

namespace {
struct CountingMode : DispatchMode {
  std::vector<std::string> seen;
  TensorList handle(const OpDef& op, const TensorList& in, const Attrs& a, TensorList* out,
                    bool inplace) override {
    seen.emplace_back(op.name);
    return dispatch(op, in, a, out, inplace);  // re-dispatch below this mode
  }
};
}  // namespace

TEST(Dispatch, ModeSeesEveryOp) {
  auto mode = std::make_shared<CountingMode>();
  Tensor a = ones({2, 2});
  {
    ModeGuard g(mode);
    Tensor b = add(a, a);
    Tensor c = exp(b.t());
    (void)c;
  }
  EXPECT_EQ(mode_stack_size(), 0u);
  ASSERT_GE(mode->seen.size(), 3u);
  EXPECT_EQ(mode->seen[0], "add");
  EXPECT_EQ(mode->seen.back(), "exp");
}

TEST(Dispatch, EveryOpHasMetaOrMakesOutputs) {
  for (const OpDef* op : registered_ops()) {
    EXPECT_TRUE(op->kernels[0] != nullptr) << op->name;
    if (!op->meta) EXPECT_TRUE(op->tags & (kView | kDynamicShape) || std::string(op->name) == "copy_") << op->name;
  }
}

// Composites (ops/composite.h): every schema parses, and a call has torch's in-place and out= forms.
TEST(Dispatch, Composites) {
  ASSERT_GT(registered_composites().size(), 50u);
  for (const Composite* c : registered_composites()) EXPECT_NO_THROW(composite_schema(*c)) << c->schema;
  const Composite* lerp_s = find_composite("lerp.Scalar");
  ASSERT_NE(lerp_s, nullptr);
  EXPECT_EQ(find_composite("lerp"), find_composite("lerp.Tensor"));  // a bare name: the first overload
  Tensor a = zeros({3}), b = full({3}, Scalar(4.0));
  TensorList r = call_composite(*lerp_s, {a, b}, {Scalar(0.25)});
  EXPECT_FLOAT_EQ(r[0].select(0, 1).item<float>(), 1.0f);
  Tensor out = empty({0}, kFloat64);  // out=: resized, written in its dtype
  TensorList o{out};
  call_composite(*lerp_s, {a, b}, {Scalar(0.5)}, &o);
  EXPECT_EQ(out.sizes(), Shape({3}));
  EXPECT_DOUBLE_EQ(out.select(0, 2).item<double>(), 2.0);
  Tensor i = zeros({3}, kInt64);  // in place: the result must cast into self's dtype
  EXPECT_THROW(call_composite(*lerp_s, {i, i}, {Scalar(0.5)}, nullptr, true), Error);
  const Composite* addcmul_c = find_composite("addcmul");
  ASSERT_NE(addcmul_c, nullptr);
  Tensor small = ones({3});  // ... and keep self's shape (no broadcast of self)
  EXPECT_THROW(call_composite(*addcmul_c, {small, ones({2, 3}), ones({2, 3})}, {Scalar(1)}, nullptr, true), Error);
  Tensor self = ones({3});
  TensorList in = call_composite(*addcmul_c, {self, full({3}, Scalar(2.0)), full({3}, Scalar(3.0))}, {Scalar(1)}, nullptr, true);
  EXPECT_EQ(in[0].impl(), self.impl());
  EXPECT_FLOAT_EQ(self.select(0, 0).item<float>(), 7.0f);
}

TEST(Random, ThreadCountInvariant) {
  int nt = get_num_threads();
  manual_seed(123);
  set_num_threads(1);
  Tensor a = randn({100000});
  manual_seed(123);
  set_num_threads(2);
  Tensor b = randn({100000});
  set_num_threads(nt);
  EXPECT_TRUE(equal(a, b));
}

TEST(Ops, Basics) {
  Tensor a = arange(Scalar(1), Scalar(7), Scalar(1), kFloat32).view({2, 3});
  EXPECT_FLOAT_EQ(sum(a).item<float>(), 21.0f);
  EXPECT_FLOAT_EQ(sum(a, Shape{0}).select(0, 2).item<float>(), 9.0f);
  Tensor m = matmul(a, a.t());
  EXPECT_FLOAT_EQ(m.select(0, 1).select(0, 1).item<float>(), 77.0f);
  Tensor sm = softmax(a, 1);
  EXPECT_NEAR(sum(sm, Shape{1}).select(0, 0).item<float>(), 1.0f, 1e-6);
  EXPECT_EQ(repr(a), "tensor([[1., 2., 3.],\n        [4., 5., 6.]])");
}

// Issue 14: sizes whose byte count overflows and views leaving their storage raise, never allocate
// a wrapped-around size or read outside the storage.
TEST(Core, CheckedSizesAndViewBounds) {
  EXPECT_THROW(make_tensor({int64_t(1) << 31, int64_t(1) << 31}, kFloat32), Error);
  EXPECT_THROW(make_tensor({int64_t(1) << 62}, kFloat32), Error);
  EXPECT_THROW(shape_numel({int64_t(1) << 62, int64_t(1) << 62, 0}), Error);
  Tensor x = zeros({4});
  EXPECT_THROW(make_view(x, {2}, {1}, -1), Error);
  EXPECT_THROW(make_view(x, {3}, {2}, 0), Error);                      // element 4 of 4
  EXPECT_THROW(make_view(x, {2}, {int64_t(1) << 62}, 0), Error);       // overflowing extent
  EXPECT_NO_THROW(make_view(x, {2}, {-1}, 3));                         // reversed, within
  EXPECT_THROW(make_view(x, {2}, {-1}, 0), Error);                     // reversed, below the start
  EXPECT_EQ(make_view(x, {0, int64_t(1) << 40}, {1, 1}, 0).numel(), 0);  // empty: nothing reached
  EXPECT_THROW(expand(ones({1}), {int64_t(1) << 62, int64_t(1) << 62}), Error);
}

namespace {
std::vector<std::string> g_warnings;
void record_warning(kiln::WarningKind, const std::string& m) { g_warnings.push_back(m); }
}  // namespace

TEST(Threads, DefaultsAndWarnings) {
  using namespace kiln::threads_detail;
  EXPECT_EQ(threads_for(8, 2.5), 2);
  EXPECT_EQ(threads_for(8, std::nullopt), 8);
  EXPECT_EQ(threads_for(4, 0.25), 1);
  EXPECT_FALSE(parse_cpu_max("max 100000").has_value());
  EXPECT_DOUBLE_EQ(*parse_cpu_max("150000 100000"), 1.5);
  EXPECT_FALSE(parse_cfs("-1", "100000").has_value());
  EXPECT_DOUBLE_EQ(*parse_cfs("200000", "100000"), 2.0);
  EXPECT_EQ(parse_thread_env("6,2"), 6);
  EXPECT_EQ(parse_thread_env("x"), 0);
  EXPECT_GE(kiln::default_num_threads(), 1);
  EXPECT_GE(kiln::get_num_interop_threads(), 1);
  // GCC's build links one libgomp; clang's (the sanitizer build) links LLVM's libomp beside the
  // libgomp that OpenBLAS needs: two runtimes, which is what the warning is for
  const auto rts = kiln::openmp_runtimes();
  ASSERT_GE(rts.size(), 1u);
  for (const auto& r : rts) EXPECT_NE(threads_detail::openmp_runtime_kind(r), "");
  auto prev = kiln::set_warning_handler(&record_warning);
  kiln::warn(kiln::WarningKind::User, "hello");
  kiln::set_warning_handler(prev);
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_EQ(g_warnings[0], "hello");
}

TEST(Accelerator, CpuBuildExplains) {
  EXPECT_FALSE(kiln::accelerator::is_available());
  EXPECT_EQ(kiln::accelerator::device_count(), 0);
  EXPECT_EQ(kiln::accelerator::explain().rfind("kiln was built without CUDA (a CPU-only build)", 0), 0u);
  kiln::accelerator::Probe p;
  p.runtime_version = 12040;
  p.driver_library = "/nonexistent/libcuda.so.1";
  const auto d = kiln::accelerator::diagnose(p);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.reason.rfind("the CUDA driver is missing: /nonexistent/libcuda.so.1 could not be loaded", 0), 0u);
  EXPECT_EQ(kiln::accelerator::cuda_version_string(12080), "12.8");
  try {
    kiln::zeros({2}, kiln::TensorOptions().device(kiln::Device{kiln::DeviceType::CUDA, -1}));
    ADD_FAILURE() << "no error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("kiln cannot place a tensor on device 'cuda': kiln was built without CUDA"),
              std::string::npos);
  }
}
