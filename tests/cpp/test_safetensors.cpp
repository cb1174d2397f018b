// safetensors (kiln/io): file and byte round trips, the mmap loader's lifetime and privacy, the
// byte layout of the reference writer, and corrupt inputs that must raise "[safetensors]" errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kiln/io/safetensors.h"
#include "kiln/kiln.h"

using namespace kiln;

namespace {

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "kiln_st_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<uint8_t> raw(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.nbytes());
}

// A file from a header string and a data section.
std::vector<uint8_t> file_bytes(const std::string& header, const std::vector<uint8_t>& data = {},
                                uint64_t n = UINT64_MAX) {
  if (n == UINT64_MAX) n = header.size();
  std::vector<uint8_t> out;
  out.reserve(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  for (char c : header) out.push_back(static_cast<uint8_t>(c));
  for (uint8_t b : data) out.push_back(b);
  return out;
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& part) {
  try {
    load(bytes);
    ADD_FAILURE() << "no error; expected one mentioning " << part;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::Value) << msg;
    EXPECT_EQ(msg.rfind("[safetensors] bytes: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

TensorMap sample() {
  TensorMap m;
  m["f32"] = arange(12, kFloat32).reshape({3, 4});
  m["t"] = arange(6, kInt64).reshape({2, 3}).t();  // non-contiguous: written contiguously
  m["bf16"] = arange(5, kFloat32).to(kBFloat16);
  m["flag"] = scalar_tensor(Scalar(true), kBool);
  m["empty"] = zeros({0, 3}, kInt16);
  m["u8"] = arange(7, kUInt8);
  return m;
}

}  // namespace

TEST(Safetensors, FileRoundTrip) {
  TensorMap m = sample();
  std::string path = temp_path("roundtrip.safetensors");
  save_file(m, path, {{"format", "kiln"}, {"note", "a \"quoted\"\nline \xc3\xa9"}});
  SafetensorsContents c = load_file_with_metadata(path);
  ASSERT_EQ(c.tensors.size(), m.size());
  for (const auto& [name, t] : m) {
    const Tensor& got = c.tensors.at(name);
    EXPECT_EQ(got.dtype(), t.dtype()) << name;
    EXPECT_EQ(got.sizes(), t.sizes()) << name;
    EXPECT_TRUE(got.is_contiguous()) << name;
    EXPECT_EQ(raw(got), raw(t)) << name;
  }
  EXPECT_EQ(c.metadata.at("note"), "a \"quoted\"\nline \xc3\xa9");
  EXPECT_EQ(c.metadata.at("format"), "kiln");
  std::remove(path.c_str());
}

TEST(Safetensors, BytesRoundTripAndLayout) {
  TensorMap m = sample();
  std::vector<uint8_t> bytes = save(m);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  EXPECT_EQ(n % 8, 0u);  // header padded to a multiple of 8
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + n);
  // larger dtypes first (I64, F32, BF16, I16, U8, BOOL), names in byte order within a dtype
  EXPECT_EQ(header.rfind("{\"t\":{\"dtype\":\"I64\",\"shape\":[3,2],\"data_offsets\":[0,48]},", 0),
            0u)
      << header;
  EXPECT_LT(header.find("\"f32\""), header.find("\"bf16\""));
  EXPECT_LT(header.find("\"u8\""), header.find("\"flag\""));
  TensorMap back = load(bytes);
  for (const auto& [name, t] : m) EXPECT_EQ(raw(back.at(name)), raw(t)) << name;
  EXPECT_EQ(save(back), bytes);
}

TEST(Safetensors, MappedTensorsOutliveFileAndStayPrivate) {
  std::string path = temp_path("mapped.safetensors");
  save_file({{"a", arange(1000, kFloat32)}, {"b", arange(10, kInt32)}}, path);
  Tensor a;
  {
    TensorMap m = load_file(path);
    a = m.at("a");
    EXPECT_EQ(static_cast<char*>(m.at("b").data_ptr()) - static_cast<char*>(a.data_ptr()), 4000);
  }
  static_cast<float*>(a.data_ptr())[3] = -1.f;  // copy-on-write: the file keeps 3
  EXPECT_EQ(static_cast<float*>(load_file(path).at("a").data_ptr())[3], 3.f);
  save_file({{"a", a}}, path);  // replaces the file while `a` still maps the old one
  std::remove(path.c_str());
  EXPECT_EQ(static_cast<float*>(a.data_ptr())[999], 999.f);
  EXPECT_EQ(static_cast<float*>(a.data_ptr())[3], -1.f);
}

TEST(Safetensors, RefusesComplex128) {
  try {
    save({{"z", zeros({2}, kComplex128)}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("complex128"), std::string::npos);
  }
}

TEST(Safetensors, CorruptInputs) {
  const std::string t = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<uint8_t> eight(8, 0);
  expect_error({1, 2, 3}, "too short");
  expect_error(file_bytes("{}", {}, 100'000'001), "100 MB");
  expect_error(file_bytes("{}", {}, 1000), "larger than the file");
  expect_error(file_bytes("{\"__metadata__\":{\"a\":\"\xff\"}}"), "UTF-8");
  expect_error(file_bytes("{" + t), "expected");
  expect_error(file_bytes("{" + t + "}", {0, 0, 0, 0}), "data section holds 4");
  expect_error(file_bytes("{" + t + "," + t + "}", eight), "duplicate tensor name");
  expect_error(file_bytes(R"({"t":{"dtype":"X","shape":[2],"data_offsets":[0,8]}})", eight),
               "unknown dtype");
  expect_error(file_bytes(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
               "non-negative");
  expect_error(file_bytes(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
               "needs 12");
  expect_error(file_bytes(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
               "invalid data_offsets");
  expect_error(file_bytes(R"({"t":{"dtype":"F32","shape":[2]}})", eight),
               "missing field 'data_offsets'");
  expect_error(file_bytes("{\"x\":" + std::string(300, '[') + std::string(300, ']') + "}"),
               "expected an object");
  std::string deep = R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":)" +
                     std::string(300, '[') + std::string(300, ']') + "}}";
  expect_error(file_bytes(deep), "nesting too deep");
  // every truncation of a valid file fails cleanly
  std::vector<uint8_t> good = save(sample());
  for (size_t cut = 0; cut < good.size(); ++cut) {
    std::vector<uint8_t> part(good.begin(), good.begin() + cut);
    EXPECT_THROW(load(part), Error) << cut;
  }
  try {
    load_file(temp_path("does-not-exist"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_EQ(std::string(e.what()).rfind("[safetensors] file '", 0), 0u) << e.what();
  }
}

// One dict type from state_dict() to save_file() and from load_file() to load_state_dict().
TEST(Safetensors, StateDictRoundTripWithoutConversion) {
  manual_seed(0);
  auto make = [] {
    auto m = std::make_shared<nn::Module>("Net");
    m->register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    m->register_module("fc2", std::make_shared<nn::Linear>(3, 2, /*bias=*/false));
    return m;
  };
  auto a = make(), b = make();
  char tmpl[] = "/tmp/kiln_sd_XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  save_file(a->state_dict(), tmpl);
  nn::LoadResult r = b->load_state_dict(load_file(tmpl));
  std::remove(tmpl);
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  TensorDict sa = a->state_dict(), sb = b->state_dict();
  ASSERT_EQ(sa.keys(), (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight"}));
  for (const auto& [k, v] : sa) EXPECT_TRUE(equal(v, sb.at(k))) << k;
}

TEST(OrderedDict, KeepsInsertionOrderAndReadsLikeAMap) {
  OrderedDict<std::string, int> d{{"b", 1}, {"a", 2}};
  d["c"] = 3;
  d.insert("b", 10);  // an existing key keeps its place
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(d.values(), (std::vector<int>{10, 2, 3}));
  EXPECT_FALSE(d.emplace("a", 5).second);
  EXPECT_EQ(d.at("a"), 2);
  EXPECT_EQ(d.count("z"), 0u);
  EXPECT_EQ(d.find("z"), d.end());
  EXPECT_EQ(d.erase("b"), 1u);
  EXPECT_EQ(d.front().first, "a");
  EXPECT_EQ(d.at("c"), 3);
  try {
    d.at("zz");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
    EXPECT_NE(std::string(e.what()).find("'zz'"), std::string::npos);
  }
}
