// Streams and events (kiln/core/stream.h): ordering through the queue, events across streams, errors
// reported by synchronize, record_stream, and the ops' C++ path. Work is ordered with gates (a task
// that holds a worker until the test opens it), never with timing.
#include <gtest/gtest.h>

#include <future>

#include "kiln/kiln.h"

using namespace kiln;

namespace {
struct Gate {
  std::promise<void> p;
  std::shared_future<void> f = p.get_future().share();
  explicit Gate(const Stream& s) {
    auto fut = f;
    s.enqueue([fut]() { fut.wait(); });
  }
  void open() { p.set_value(); }
};
std::vector<float> values(const Tensor& t) {
  Tensor c = contiguous(t);
  stream_detail::before_host_read();
  const float* p = static_cast<const float*>(c.data_ptr());
  return std::vector<float>(p, p + c.numel());
}
}  // namespace

TEST(Stream, QueuedOpsRunInOrder) {
  Stream s = Stream::create();
  EXPECT_FALSE(s.is_default());
  EXPECT_TRUE(current_stream().is_default());
  Tensor x = ones({5});
  Tensor y;
  {
    Gate g(s);
    {
      StreamGuard guard(s);
      EXPECT_EQ(current_stream(), s);
      for (int i = 0; i < 10; ++i) add_(x, ones({5}));
      y = mul(x, Scalar(2.0));
    }
    EXPECT_TRUE(current_stream().is_default());
    EXPECT_FALSE(s.query());
    EXPECT_EQ(y.sizes(), (Shape{5}));
    g.open();
  }
  s.synchronize();
  EXPECT_TRUE(s.query());
  EXPECT_EQ(values(y), std::vector<float>(5, 22.0f));
}

TEST(Stream, EventsOrderStreams) {
  Stream a = Stream::create(), b = Stream::create();
  Tensor t = zeros({4});
  Tensor u;
  Event e(/*enable_timing=*/true), start(true);
  {
    Gate g(a);
    start.record(a);
    {
      StreamGuard guard(a);
      fill_(t, Scalar(3.0));
    }
    e.record(a);
    EXPECT_FALSE(e.query());
    b.wait_event(e);
    {
      StreamGuard guard(b);
      u = add(t, Scalar(1.0));
    }
    EXPECT_FALSE(b.query());
    g.open();
  }
  b.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_GE(start.elapsed_time(e), 0.0);
  EXPECT_EQ(values(u), std::vector<float>(4, 4.0f));
  Stream c = Stream::create();
  c.wait_stream(a);
  c.synchronize();
}

TEST(Stream, KernelErrorRaisedBySynchronize) {
  Stream s = Stream::create();
  s.enqueue([]() { KILN_FAIL(Index, "test", "boom"); });
  EXPECT_THROW(s.synchronize(), Error);
  s.synchronize();  // reported once
  int ran = 0;
  s.enqueue([&]() { ++ran; });
  s.synchronize();
  EXPECT_EQ(ran, 1);
}

TEST(Stream, RecordStreamKeepsStorage) {
  Stream s = Stream::create();
  std::weak_ptr<Storage> w;
  {
    Gate g(s);
    {
      Tensor t = ones({1024});
      w = t.storage();
      record_stream(t, s);
    }
    EXPECT_FALSE(w.expired());  // held until the stream's work so far has run
    g.open();
  }
  s.synchronize();
  EXPECT_TRUE(w.expired());
}

TEST(Stream, AutogradAndDefaultStreamSemantics) {
  Stream s = Stream::create();
  Tensor w = ones({3}).requires_grad_(true);
  {
    StreamGuard guard(s);
    Tensor loss = sum(mul(w, w));
    loss.backward();
  }
  s.synchronize();
  EXPECT_EQ(values(grad(w)), std::vector<float>(3, 2.0f));
  Stream d = default_stream();
  int ran = 0;
  d.enqueue([&]() { ++ran; });  // the default stream runs at once
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(d.query());
  synchronize_streams();
}

TEST(Stream, WorkerWaitingOnItsOwnQueueRaises) {
  Stream s = Stream::create();
  s.enqueue([]() {});
  s.enqueue([s]() { s.synchronize(); });  // would never finish: raised instead, at the next sync
  EXPECT_THROW(s.synchronize(), Error);
  s.synchronize();
}
