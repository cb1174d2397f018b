// Symbolic sizes: the normal form, ranges, guards and the env's lifetime checks (kiln/core/symint.h).
#include <gtest/gtest.h>

#include "kiln/core/error.h"
#include "kiln/core/symint.h"

using namespace kiln;

TEST(SymInt, ConcreteArithmeticIsPlainIntegers) {
  SymInt a = 6, b = 4;
  EXPECT_FALSE((a + b).is_symbolic());
  EXPECT_EQ((a * b).raw(), 24);
  EXPECT_EQ((a / b).raw(), 1);
  EXPECT_EQ((SymInt(-7) / 2).raw(), -3);  // C++'s division on concrete values, as meta code had it
  EXPECT_EQ((a % b).raw(), 2);
  EXPECT_TRUE(static_cast<bool>(a > b));
  EXPECT_TRUE((a == 6).is_static());
  EXPECT_EQ(sym_max(a, b).raw(), 6);
  EXPECT_THROW(SymInt(INT64_MAX) + 1, Error);
  EXPECT_THROW(SymInt(INT64_MAX / 2) * 3, Error);
  EXPECT_THROW(a / 0, Error);
  EXPECT_EQ(sizeof(SymInt), 8u);
  EXPECT_TRUE(std::is_trivially_copyable_v<SymInt>);
}

TEST(SymInt, NormalFormMakesEqualExpressionsEqual) {
  ShapeEnv env;
  ShapeEnvGuard g(env);
  SymInt B = env.create_symbol("batch", 4), T = env.create_symbol("seq", 5);
  EXPECT_TRUE(B.is_symbolic());
  EXPECT_EQ(B.str(), "batch");
  EXPECT_EQ(B.hint(), 4);
  SymInt x = B * T * 64, y = (T * 64) * B;
  EXPECT_EQ(x.raw(), y.raw());  // one object
  EXPECT_TRUE((x == y).is_static());
  EXPECT_TRUE(static_cast<bool>(x == y));
  EXPECT_EQ(x.hint(), 4 * 5 * 64);
  EXPECT_EQ((B + T - B).raw(), T.raw());
  EXPECT_EQ((B * T - T * B).raw(), 0);
  EXPECT_FALSE((B - B).is_symbolic());
  EXPECT_EQ((2 * B + 3).str(), "2*batch + 3");
  EXPECT_EQ((B * T).str(), "batch*seq");
  EXPECT_EQ((-B).str(), "-batch");
  EXPECT_EQ((T - B).str(), "seq - batch");
  // exact divisions simplify (reshape's -1): (B*T*64) / 64 and / (B*64)
  EXPECT_EQ((x / 64).raw(), (B * T).raw());
  EXPECT_EQ((x / (B * 64)).raw(), T.raw());
  EXPECT_EQ((x % T).raw(), 0);
  // others stay expressions, with floor semantics and ranges
  SymInt h = T / 2;
  EXPECT_TRUE(h.is_symbolic());
  EXPECT_EQ(h.str(), "(seq//2)");
  EXPECT_EQ(h.hint(), 2);
  EXPECT_EQ((T % 2).hint(), 1);
  EXPECT_EQ(env.range(T % 3).first, 0);
  EXPECT_EQ(env.range(T % 3).second, 2);
  EXPECT_EQ(env.range(h).first, 1);
  EXPECT_EQ(env.range(B * T).first, 4);
  EXPECT_EQ(env.range(B * T).second, ShapeEnv::kInf);
  EXPECT_EQ(sym_max(B, 1).raw(), B.raw());  // decided by the range: B >= 2
  EXPECT_EQ(sym_min(B, 1).raw(), 1);
  EXPECT_TRUE(env.guards().empty());
}

TEST(SymInt, RangesDecideWithoutGuards) {
  ShapeEnv env;
  ShapeEnvGuard g(env);
  SymInt B = env.create_symbol("batch", 4);
  EXPECT_FALSE(static_cast<bool>(B == 1));  // broadcasting's question: decided by B >= 2
  EXPECT_TRUE(static_cast<bool>(B != 0));
  EXPECT_TRUE(static_cast<bool>(B > 1));
  EXPECT_TRUE(static_cast<bool>(B * 2 >= B + 2));
  EXPECT_TRUE(static_cast<bool>(B + 1 > B));
  EXPECT_TRUE(env.guards().empty());
}

TEST(SymInt, UndecidedComparisonsRecordGuards) {
  ShapeEnv env;
  ShapeEnvGuard g(env);
  SymInt B = env.create_symbol("batch", 4), T = env.create_symbol("seq", 5, 1, 512);
  SymBool c = (B == T);
  EXPECT_FALSE(c.is_static());
  EXPECT_TRUE(env.guards().empty());  // only using it as a bool records
  {
    ShapeEnv::Where w("mul");
    EXPECT_FALSE(static_cast<bool>(c));
  }
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].text, "batch != seq");
  EXPECT_EQ(env.guards()[0].where, "mul");
  EXPECT_TRUE(static_cast<bool>(T != 1));  // seq may be 1: a guard
  EXPECT_EQ(env.guards().back().text, "seq != 1");
  EXPECT_TRUE(static_cast<bool>(!(T < B + 1) || true));
  // re-checking for new values
  EXPECT_EQ(env.check({4, 5}), std::nullopt);
  EXPECT_EQ(env.check({7, 9}), std::nullopt);
  ASSERT_TRUE(env.check({6, 6}).has_value());
  EXPECT_NE(env.check({6, 6})->find("batch != seq"), std::string::npos);
  ASSERT_TRUE(env.check({6, 1}).has_value());
  EXPECT_NE(env.check({6, 1})->find("seq != 1"), std::string::npos);
  EXPECT_NE(env.check({6, 600})->find("outside its range"), std::string::npos);
  EXPECT_EQ(env.evaluate(B * T + 1, {3, 7}), 22);
}

TEST(SymInt, GuardIntSpecialisesAndSaysWho) {
  ShapeEnv env;
  ShapeEnvGuard g(env);
  SymInt T = env.create_symbol("seq", 5);
  EXPECT_EQ((T * 2).guard_int(), 10);
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].text, "2*seq == 10");
  EXPECT_TRUE(env.guards()[0].specialization);
  EXPECT_NE(env.guards()[0].where.find("test_symint.cpp:"), std::string::npos);
  EXPECT_EQ(T.guard_int("user line 3"), 5);
  EXPECT_EQ(env.guards()[1].where, "user line 3");
  EXPECT_NE(env.check({6})->find("2*seq == 10"), std::string::npos);
}

TEST(SymInt, UnbackedSizesHaveNoHint) {
  ShapeEnv env;
  ShapeEnvGuard g(env);
  SymInt u = env.create_unbacked();
  EXPECT_EQ(u.str(), "u0");
  EXPECT_THROW(u.hint(), Error);
  EXPECT_TRUE(static_cast<bool>(u >= 0));  // the range decides
  SymInt n = u * 3;
  EXPECT_THROW(static_cast<bool>(n == 6), Error);
  EXPECT_THROW(n.guard_int(), Error);
}

TEST(SymInt, OutsideItsEnvRaises) {
  SymInt s;
  {
    ShapeEnv env;
    ShapeEnvGuard g(env);
    s = env.create_symbol("batch", 4);
  }
  EXPECT_THROW(s + 1, Error);
  EXPECT_THROW(s.str(), Error);
  ShapeEnv other;
  ShapeEnvGuard g(other);
  EXPECT_THROW(s * 2, Error);
  EXPECT_THROW(other.create_symbol("x", 1), Error);  // hint below the default min 2
  EXPECT_FALSE(other.create_symbol("one", 1, 1, 1).is_symbolic());  // a one-point range is a number
}

TEST(SymInt, Shapes) {
  ShapeEnv env;
  ShapeEnvGuard g(env);
  SymInt B = env.create_symbol("batch", 4), T = env.create_symbol("seq", 5);
  SymShape s{B, T, 64};
  EXPECT_TRUE(is_symbolic(s));
  EXPECT_EQ(sym_numel(s).str(), "64*batch*seq");
  SymShape st = sym_contiguous_strides(s);
  EXPECT_EQ(sym_str(st), "(64*seq, 64, 1)");
  EXPECT_EQ(sym_str({B}), "(batch,)");
}

// ---- meta tensors with symbolic sizes: ops keep them symbolic ------------------------------------
#include "kiln/attention/sdpa.h"
#include "kiln/kiln.h"
#include "kiln/nn/loss.h"

namespace {
TensorOptions meta_f32() { return TensorOptions(kFloat32).device(kMeta); }
std::string guards_str(const ShapeEnv& env) {
  std::string s;
  for (const Guard& g : env.guards()) s += g.text + " (" + g.where + "); ";
  return s;
}

// The quickstart's transformer block written with sym_size (libtorch's symbolic API), so a traced
// batch and sequence length stay symbolic.
struct SymBlock : nn::Module {
  int64_t heads;
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::Linear> qkv, proj, fc, out;
  SymBlock(int64_t d, int64_t h) : Module("SymBlock"), heads(h) {
    ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(Shape{d}));
    qkv = register_module("qkv", std::make_shared<nn::Linear>(d, 3 * d));
    proj = register_module("proj", std::make_shared<nn::Linear>(d, d));
    ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(Shape{d}));
    fc = register_module("fc", std::make_shared<nn::Linear>(d, 4 * d));
    out = register_module("out", std::make_shared<nn::Linear>(4 * d, d));
  }
  Tensor forward(const Tensor& x) {
    SymInt B = x.sym_size(0), T = x.sym_size(1), C = x.sym_size(2);
    TensorList q = split(qkv->forward(ln1->forward(x)), C.expect_int("split"), 2);
    for (Tensor& t : q) t = view_symint(t, {B, T, heads, C / heads}).transpose(1, 2);
    Tensor y = scaled_dot_product_attention(q[0], q[1], q[2], {}, 0.0, /*is_causal=*/true);
    y = reshape_symint(y.transpose(1, 2), {B, T, C});
    Tensor h = x + proj->forward(y);
    return h + out->forward(gelu(fc->forward(ln2->forward(h))));
  }
};
}  // namespace

TEST(SymbolicMeta, OpsKeepSizesSymbolic) {
  ShapeEnv env;
  ShapeEnvGuard g(env);
  SymInt B = env.create_symbol("batch", 4), T = env.create_symbol("seq", 5);
  Tensor x = empty_symint({B, T, 8}, meta_f32());
  ASSERT_TRUE(x.is_meta());
  ASSERT_TRUE(x.has_symbolic_sizes());
  EXPECT_EQ(sym_str(x.sym_sizes()), "(batch, seq, 8)");
  EXPECT_EQ(sym_str(x.sym_strides()), "(8*seq, 8, 1)");
  Tensor w = empty({8, 16}, meta_f32());
  Tensor y = relu(matmul(x, w) + 1.0);
  EXPECT_EQ(sym_str(y.sym_sizes()), "(batch, seq, 16)");
  EXPECT_EQ(sym_str(sum(y, Shape{1}).sym_sizes()), "(batch, 16)");
  EXPECT_EQ(sym_str(view_symint(y, {B * T, 16}).sym_sizes()), "(batch*seq, 16)");
  EXPECT_EQ(sym_str(reshape_symint(y, {-1, 16}).sym_sizes()), "(batch*seq, 16)");
  Tensor yt = y.transpose(0, 1);
  EXPECT_EQ(sym_str(yt.sym_sizes()), "(seq, batch, 16)");
  EXPECT_EQ(sym_str(yt.sym_strides()), "(16, 16*seq, 1)");
  EXPECT_EQ(sym_str(reshape_symint(yt, {-1, 16}).sym_sizes()), "(batch*seq, 16)");  // a copy, then a view
  EXPECT_EQ(sym_str(cat({x, x}, 1).sym_sizes()), "(batch, 2*seq, 8)");
  EXPECT_EQ(sym_str(x.select(1, 0).sym_sizes()), "(batch, 8)");
  EXPECT_EQ(sym_str(softmax(x, -1).sym_sizes()), "(batch, seq, 8)");
  EXPECT_EQ(sym_str(expand_symint(empty({1, 8}, meta_f32()), {B, 8}).sym_sizes()), "(batch, 8)");
  EXPECT_TRUE(env.guards().empty()) << guards_str(env);
  // a plain size() pins that dimension, and says who asked
  EXPECT_EQ(y.size(1), 5);
  ASSERT_EQ(env.guards().size(), 1u) << guards_str(env);
  EXPECT_EQ(env.guards()[0].text, "seq == 5");
  EXPECT_NE(env.guards()[0].where.find("test_symint.cpp:"), std::string::npos) << env.guards()[0].where;
  // mismatched symbolic sizes: broadcasting needs them equal, which becomes a guard
  SymInt S = env.create_symbol("other", 5);
  Tensor z = x + empty_symint({B, S, 8}, meta_f32());
  EXPECT_EQ(env.guards().back().text, "seq == other");
  EXPECT_EQ(env.guards().back().where, "add");
  (void)z;
}

// The block and its embedding on meta, traced on a symbolic (batch, seq) input up to the loss;
// check(env, block, tok, h, loss) runs inside the trace.
template <class F>
void trace_block_loss(F&& check) {
  manual_seed(0);
  SymBlock block(16, 2);
  nn::Embedding tok(11, 16);
  block.to(kMeta);
  tok.to(kMeta);
  ShapeEnv env;
  ShapeEnvGuard g(env);
  SymInt B = env.create_symbol("batch", 3), T = env.create_symbol("seq", 7, 2, 64);
  Tensor idx = empty_symint({B, T}, TensorOptions(kInt64).device(kMeta));
  Tensor h = block.forward(tok.forward(idx));
  Tensor logits = matmul(h, tok.weight().t());
  Tensor loss = nn::functional::cross_entropy(view_symint(logits, {B * T, 11}), view_symint(idx, {B * T}));
  check(env, block, tok, h, loss);
}

TEST(SymbolicMeta, TransformerBlockForwardAndLoss) {
  trace_block_loss([](ShapeEnv& env, SymBlock&, nn::Embedding&, const Tensor& h, const Tensor& loss) {
    EXPECT_EQ(sym_str(h.sym_sizes()), "(batch, seq, 16)");
    EXPECT_EQ(loss.dim(), 0);
    EXPECT_TRUE(loss.is_meta());
    EXPECT_TRUE(env.guards().empty()) << guards_str(env);
    EXPECT_EQ(env.check({5, 9}), std::nullopt);
    EXPECT_TRUE(env.check({5, 65}).has_value());  // outside seq's range
  });
}

// The same block's backward: the derivatives and the engine compute in SymInts, so loss.backward()
// pins neither the batch nor the sequence length, and every gradient is shaped like its parameter.
TEST(SymbolicMeta, TransformerBlockBackward) {
  trace_block_loss([](ShapeEnv& env, SymBlock& block, nn::Embedding& tok, const Tensor&, const Tensor& loss) {
    backward({loss});
    EXPECT_TRUE(env.guards().empty()) << guards_str(env);
    nn::NamedTensors params = block.named_parameters();
    for (const auto& np : tok.named_parameters()) params.push_back(np);
    ASSERT_FALSE(params.empty());
    for (const auto& [name, p] : params) {
      Tensor gp = grad(p);
      ASSERT_TRUE(gp.defined()) << name;
      EXPECT_TRUE(gp.is_meta());
      EXPECT_EQ(sym_str(gp.sym_sizes()), sym_str(p.sym_sizes())) << name;
    }
    EXPECT_TRUE(env.guards().empty()) << guards_str(env);
    EXPECT_EQ(env.check({5, 9}), std::nullopt);
  });
}
