// parallel.h's team (run_as_team): parallel_for and run_spmd inside it hand their work to the held
// threads; nested calls inside a job run serially; exceptions from the body pass through; outside a
// team and on one thread, the plain paths.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/kiln.h"

namespace {
namespace cpu = kiln::cpu;

struct Threads {
  int saved = kiln::get_num_threads();
  explicit Threads(int n) { kiln::set_num_threads(n); }
  ~Threads() { kiln::set_num_threads(saved); }
};

TEST(Team, ParallelForAndSpmdUseTheTeam) {
  Threads two(2);
  std::vector<int64_t> v(100000, 0);
  std::atomic<int> chunks{0}, inner_serial{0};
  std::vector<int> seen(2, 0);
  int64_t before = cpu::regions_opened();
  cpu::run_as_team(2, [&] {
    EXPECT_TRUE(cpu::leads_team());
    EXPECT_FALSE(cpu::in_parallel_region());
    for (int rep = 0; rep < 50; ++rep)  // many jobs in a row: one region for all of them
      cpu::parallel_for(static_cast<int64_t>(v.size()), 1000, [&](int64_t b, int64_t e) {
        ++chunks;
        EXPECT_FALSE(cpu::leads_team());  // a job's own calls run serially
        cpu::parallel_for(10, 1, [&](int64_t b2, int64_t e2) { inner_serial += b2 == 0 && e2 == 10; });
        for (int64_t i = b; i < e; ++i) v[i] += i;
      });
    std::atomic<int64_t> arrived{0};
    cpu::run_spmd(4, [&](int t, int T) {  // capped at the team's threads (2, or fewer if OpenMP gave fewer)
      EXPECT_LE(T, 2);
      seen[t] = 1;
      if (T == 1) seen[1] = 1;
      arrived.fetch_add(1);
      while (arrived.load() < T) {
      }  // all T run at once (a barrier would hang otherwise)
    });
    EXPECT_TRUE(cpu::leads_team());
  });
  EXPECT_FALSE(cpu::leads_team());
  EXPECT_EQ(cpu::regions_opened(), before);  // the team's jobs open no region
  EXPECT_EQ(chunks.load(), 100);
  EXPECT_EQ(inner_serial.load(), 100);
  EXPECT_EQ(seen, (std::vector<int>{1, 1}));
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) ASSERT_EQ(v[i], 50 * i);
}

TEST(Team, ExceptionsPassThroughAndTheTeamEnds) {
  Threads two(2);
  EXPECT_THROW(cpu::run_as_team(2, [&] {
                 cpu::parallel_for(100000, 1000, [](int64_t, int64_t) {});
                 throw std::runtime_error("boom");
               }),
               std::runtime_error);
  EXPECT_FALSE(cpu::leads_team());
  int64_t sum = 0;  // the pool works normally afterwards
  std::vector<int64_t> part(2, 0);
  cpu::parallel_for(100000, 1000, [&](int64_t b, int64_t e) {
    int64_t s = 0;
    for (int64_t i = b; i < e; ++i) s += i;
    part[b == 0 ? 0 : 1] += s;
  });
  sum = part[0] + part[1];
  EXPECT_EQ(sum, int64_t(100000) * 99999 / 2);
}

TEST(Team, AThrowingJobStillWaitsForTheOthers) {
  Threads two(2);
  std::atomic<int> finished{0};
  bool led_after = false;
  cpu::run_as_team(2, [&] {
    try {
      cpu::parallel_for(2, 1, [&](int64_t b, int64_t) {
        if (b == 0) throw std::runtime_error("leader's share");  // (the contract says: never)
        for (int i = 0; i < 2000000; ++i) asm volatile("");  // a while
        ++finished;
      });
    } catch (const std::runtime_error&) {
      // the worker's chunk ran to its end before the exception left parallel_for, whose frame
      // the chunk reads
      EXPECT_EQ(finished.load(), kiln::get_num_threads() > 1 ? 1 : 0);
    }
    led_after = cpu::leads_team();
  });
  EXPECT_TRUE(led_after);
}

TEST(Team, NeverMoreThreadsThanThePool) {
  Threads two(2);
  int seen_T = 0;
  cpu::run_as_team(8, [&] { cpu::run_spmd(8, [&](int t, int T) { if (t == 0) seen_T = T; }); });
  EXPECT_LE(seen_T, 2);  // kernels size per-thread scratch by get_num_threads()
}

TEST(Team, OneThreadOrNestedIsJustTheBody) {
  Threads one(1);
  bool ran = false;
  cpu::run_as_team(1, [&] {
    ran = true;
    EXPECT_FALSE(cpu::leads_team());
  });
  EXPECT_TRUE(ran);
  kiln::set_num_threads(2);
  int calls = 0;
  cpu::run_as_team(2, [&] {
    cpu::run_as_team(2, [&] { ++calls; });  // already leading: no second team
  });
  EXPECT_EQ(calls, 1);
}
}  // namespace
