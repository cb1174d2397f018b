// Export from C++ (kiln::export_program), the archive in memory, and the standalone runtime: a C++
// LSTM and a TransformerEncoderLayer exported with dynamic batch and sequence, run at new sizes.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "examples/quickstart/model.h"
#include "kiln/export/archive.h"
#include "kiln/kiln.h"

namespace {
using kiln::Tensor;
namespace nn = kiln::nn;

double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  return kiln::max(kiln::abs(a - b)).item().to_double();
}

TEST(Export, CppLstmRoundTripAtNewSizes) {
  kiln::manual_seed(0);
  auto lstm = std::make_shared<nn::LSTM>(6, 8, 2, true, /*batch_first=*/true, 0.0, /*bidirectional=*/true);
  lstm->eval();
  auto fwd = [&](const kiln::TensorList& in) {
    auto [y, hc] = lstm->forward(in[0]);
    return kiln::TensorList{y, std::get<0>(hc), std::get<1>(hc)};
  };
  auto ep = kiln::export_program(*lstm, fwd, {kiln::randn({2, 5, 6})},
                                 {{{0, kiln::Dim("batch")}, {1, kiln::Dim("seq")}}});
  EXPECT_TRUE(ep->guards.empty());
  int layers = 0;
  for (const auto& n : ep->nodes) layers += std::string(n.op->name) == "lstm_layer";
  EXPECT_EQ(layers, 4);  // one op per layer and direction: nothing unrolled
  kiln::runtime::Program prog(kiln::load_program_bytes(kiln::save_program_bytes(*ep)));
  for (auto [b, t] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {2, 257}}) {
    Tensor x = kiln::randn({b, t, 6});
    kiln::TensorList got = prog.run({x});
    kiln::NoGradGuard ng;
    kiln::TensorList want = fwd({x});
    ASSERT_EQ(got.size(), 3u);
    for (size_t i = 0; i < 3; ++i)  // (the runtime's float32 products on kiln's GEMM, eager's on OpenBLAS)
      EXPECT_LE(max_diff(got[i], want[i]), 1e-6) << b << "x" << t << " output " << i;
  }
  EXPECT_GT(prog.stats().plans, 0);
}

TEST(Export, CppTransformerLayerAndInputChecks) {
  kiln::manual_seed(1);
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(16, 4, 32, 0.0);
  layer->eval();
  auto fwd = [&](const kiln::TensorList& in) { return kiln::TensorList{layer->forward(in[0])}; };
  auto ep = kiln::export_program(*layer, fwd, {kiln::randn({6, 2, 16})},
                                 {{{0, kiln::Dim("seq", 1, 512)}, {1, kiln::Dim("batch")}}});
  kiln::runtime::Program prog(ep);
  for (auto [t, b] : {std::pair<int64_t, int64_t>{1, 1}, {9, 3}, {257, 2}}) {
    Tensor x = kiln::randn({t, b, 16});
    kiln::NoGradGuard ng;
    EXPECT_LT(max_diff(prog.run({x})[0], layer->forward(x)), 1e-5) << t << "x" << b;
  }
  EXPECT_THROW(prog.run({kiln::randn({513, 2, 16})}), kiln::Error);            // outside seq's range
  EXPECT_THROW(prog.run({kiln::randn({4, 2, 15})}), kiln::Error);             // a static size
  EXPECT_THROW(prog.run({kiln::randn({4, 2, 16}, kiln::kFloat64)}), kiln::Error);  // dtype
  EXPECT_THROW(prog.run({}), kiln::Error);
}

TEST(Export, CppQuickstartModelDynamicBatchAndSequence) {
  kiln::manual_seed(2);
  auto model = std::make_shared<quickstart::CharTransformer>(13, 32, 32, 2, 4);
  model->eval();
  auto ep = kiln::export_program(model, {kiln::randint(0, 13, {2, 7})},
                                 {{{0, kiln::Dim("batch")}, {1, kiln::Dim("seq", 1, 32)}}});
  EXPECT_TRUE(ep->guards.empty());
  kiln::runtime::Program prog(kiln::load_program_bytes(kiln::save_program_bytes(*ep)));
  for (auto [b, t] : {std::pair<int64_t, int64_t>{1, 1}, {3, 32}, {5, 17}}) {
    Tensor idx = kiln::randint(0, 13, {b, t});
    kiln::NoGradGuard ng;
    // (on several threads the runtime's float32 products run on kiln's GEMM, eager's on OpenBLAS)
    const Tensor want = model->forward(idx);
    EXPECT_LE(max_diff(prog.run({idx})[0], want), 1e-6 * kiln::max(kiln::abs(want)).item().to_double()) << b << "x" << t;
  }
  EXPECT_THROW(prog.run({kiln::randint(0, 13, {2, 33})}), kiln::Error);  // beyond the context
}

TEST(Export, SizeExpressionsRoundTrip) {
  kiln::ShapeEnv env;
  kiln::ShapeEnvGuard g(env);
  kiln::SymInt b = env.create_symbol("batch", 4), t = env.create_symbol("seq", 5);
  std::map<std::string, kiln::SymInt> syms{{"batch", b}, {"seq", t}};
  for (kiln::SymInt e : {b * t * 3 + 1, t - b, (b * t) / 2, (t + 1) % 3, kiln::sym_max(b, t) * 2, -b + 7}) {
    kiln::SymInt back = kiln::export_detail::parse_sym_expr(e.str(), syms);
    EXPECT_EQ(back.raw(), e.raw()) << e.str();
  }
  EXPECT_THROW(kiln::export_detail::parse_sym_expr("batch +* 2", syms), kiln::Error);
  EXPECT_THROW(kiln::export_detail::parse_sym_expr("evil", syms), kiln::Error);
  EXPECT_THROW(kiln::export_detail::parse_sym_expr(std::string(200, '(') + "1" + std::string(200, ')'), syms), kiln::Error);
}

TEST(Export, CorruptBytesNeverLoad) {
  auto lin = std::make_shared<nn::Linear>(3, 2);
  auto ep = kiln::export_program(*lin, [&](const kiln::TensorList& in) { return kiln::TensorList{lin->forward(in[0])}; },
                                 {kiln::randn({4, 3})}, {{{0, kiln::Dim("batch")}}});
  const std::string bytes = kiln::save_program_bytes(*ep);
  EXPECT_NO_THROW(kiln::load_program_bytes(bytes));
  for (size_t cut = 0; cut < bytes.size(); cut += 7) EXPECT_THROW(kiln::load_program_bytes(bytes.substr(0, cut)), kiln::Error);
  for (size_t pos = 0; pos < bytes.size(); pos += 5) {
    std::string bad = bytes;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x01);
    EXPECT_THROW(kiln::load_program_bytes(bad), kiln::Error) << "flipped byte " << pos;
  }
}
}  // namespace

// Random edits of the graph JSON, re-packed with valid CRCs (archive::Writer), under the sanitizers in
// `make test`: loading raises kiln::Error or gives a program whose run returns or raises kiln::Error;
// nothing reads out of bounds.
TEST(Export, MutatedGraphJsonUnderSanitizers) {
  auto lin = std::make_shared<nn::Linear>(3, 2);
  auto ep = kiln::export_program(lin, {kiln::randn({4, 3})}, {{{0, kiln::Dim("batch", 0, 64)}}});
  const std::string bytes = kiln::save_program_bytes(*ep);
  auto blob = kiln::archive::Blob::copy(bytes);
  std::vector<std::pair<std::string, std::string>> members;
  for (const auto& m : kiln::archive::read(*blob, "test"))
    members.emplace_back(m.name, std::string(reinterpret_cast<const char*>(m.data), m.size));
  const std::string alphabet = "0123456789-+*/(),:[]{}\"\\ abtuxnl.e";
  std::mt19937 rng(12345);
  int loaded = 0, ran = 0;
  for (int trial = 0; trial < 400; ++trial) {
    kiln::archive::Writer w;
    for (auto [name, data] : members) {
      if (name.ends_with("model.json"))
        for (int e = 0, n = 1 + static_cast<int>(rng() % 3); e < n; ++e) {
          const size_t pos = rng() % data.size();
          switch (rng() % 3) {
            case 0: data[pos] = alphabet[rng() % alphabet.size()]; break;
            case 1: data.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
            default: data.erase(pos, 1 + rng() % 4); break;
          }
        }
      w.add(name, data);
    }
    std::shared_ptr<kiln::ExportedProgram> p;
    try {
      p = kiln::load_program_bytes(w.finish());
    } catch (const kiln::Error&) {
      continue;
    }
    ++loaded;
    try {
      kiln::runtime::Program(p).run({kiln::randn({5, 3})});
      ++ran;
    } catch (const kiln::Error&) {
    }
  }
  EXPECT_LT(loaded, 400);  // most edits break the JSON or its checks
}

// The runtime holds the pool as one team for a whole run once the plan's first run opened two
// parallel regions or more (parallel.h's run_as_team): the same outputs as eager to float tolerance
// (float32 products then run on kiln's GEMM, not OpenBLAS), on every later run.
TEST(Export, RuntimeRunsAsOneTeam) {
  struct Restore {
    int threads = kiln::get_num_threads();
    ~Restore() { kiln::set_num_threads(threads); }
  } restore;
  kiln::set_num_threads(2);
  kiln::manual_seed(3);
  auto model = std::make_shared<quickstart::CharTransformer>(13, 64, 64, 2, 4);
  model->eval();
  auto ep = kiln::export_program(model, {kiln::randint(0, 13, {2, 7})},
                                 {{{0, kiln::Dim("batch")}, {1, kiln::Dim("seq", 1, 64)}}});
  kiln::runtime::Program prog(ep);
  Tensor idx = kiln::randint(0, 13, {4, 64});
  kiln::NoGradGuard ng;
  const Tensor want = model->forward(idx);
  const double scale = kiln::max(kiln::abs(want)).item().to_double();
  EXPECT_EQ(prog.stats().team, -1);
  const Tensor first = prog.run({idx})[0];
  EXPECT_LT(max_diff(first, want), 1e-5 * scale);
  EXPECT_EQ(prog.stats().team, 1);  // learnt on the first run
  // with the team: the first run's bits (the same GEMM). The base table keeps OpenBLAS's products,
  // which a team runs on one OpenBLAS thread: their bits may change with OpenBLAS's thread count (on
  // Zen 3's kernels they do, by an ulp), so there the runs are held to float tolerance.
  const bool kiln_gemm = std::string(kiln::cpu::cpu_isa()) != "base";
  for (int run = 1; run < 3; ++run) {
    if (kiln_gemm) EXPECT_EQ(max_diff(prog.run({idx})[0], first), 0.0) << "run " << run;
    else EXPECT_LT(max_diff(prog.run({idx})[0], first), 1e-5 * scale) << "run " << run;
  }
  // deterministic mode: OpenBLAS's products, the same bits on every run and at one thread
  kiln::use_deterministic_algorithms(true);
  kiln::runtime::Program det(ep);
  const Tensor d0 = det.run({idx})[0];
  for (int run = 1; run < 3; ++run) EXPECT_EQ(max_diff(det.run({idx})[0], d0), 0.0) << "run " << run;
  kiln::set_num_threads(1);
  EXPECT_EQ(max_diff(det.run({idx})[0], d0), 0.0) << "one thread";
  kiln::set_num_threads(2);
  kiln::use_deterministic_algorithms(false);
  // a program too small to open two regions keeps to the calling thread
  auto lin = std::make_shared<nn::Linear>(4, 3);
  auto fwd = [&](const kiln::TensorList& in) { return kiln::TensorList{lin->forward(in[0])}; };
  kiln::runtime::Program small(kiln::export_program(*lin, fwd, {kiln::randn({2, 4})}, {{{0, kiln::Dim("batch")}}}));
  for (int run = 0; run < 2; ++run) EXPECT_EQ(max_diff(small.run({kiln::ones({2, 4})})[0], lin->forward(kiln::ones({2, 4}))), 0.0);
  EXPECT_EQ(small.stats().team, 0);
}
