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
