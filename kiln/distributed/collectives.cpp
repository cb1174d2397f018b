// The collectives and point-to-point operations of ProcessGroup on Open MPI: argument checks, the
// dtypes on the wire, the consistency check, and the MPI calls the communication thread runs. The
// runtime (init, groups, the watchdog, the thread itself) is process_group.cpp.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>
#include <type_traits>

#include "kiln/autograd/autograd.h"
#include "kiln/core/error.h"
#include "kiln/distributed/detail/mpi.h"
#include "kiln/distributed/process_group.h"
#include "kiln/ops/ops.h"

namespace kiln::distributed {

using detail::mpi_check;

namespace {

int count_of(int64_t n, const char* op) {
  KILN_CHECK(n <= INT_MAX, Value, op, n, " elements per rank exceed MPI's int counts (2^31 - 1)");
  return static_cast<int>(n);
}

// ---- dtypes on the wire ------------------------------------------------------------------------------
// Reductions of float16/bfloat16/float8 run in float32; every other dtype travels as itself (the
// 16-bit and 8-bit floats as raw bits when nothing is reduced).
bool reduced_in_float32(Dtype d) {
  return d == kFloat16 || d == kBFloat16 || d == Dtype::Float8_e4m3fn || d == Dtype::Float8_e5m2;
}

MPI_Datatype mpi_type(Dtype d) {
  switch (d) {
    case Dtype::Bool:
    case Dtype::UInt8:
    case Dtype::Float8_e4m3fn:
    case Dtype::Float8_e5m2: return MPI_UINT8_T;
    case Dtype::Int8: return MPI_INT8_T;
    case Dtype::Int16: return MPI_INT16_T;
    case Dtype::UInt16:
    case Dtype::Float16:
    case Dtype::BFloat16: return MPI_UINT16_T;
    case Dtype::Int32: return MPI_INT32_T;
    case Dtype::UInt32: return MPI_UINT32_T;
    case Dtype::Int64: return MPI_INT64_T;
    case Dtype::UInt64: return MPI_UINT64_T;
    case Dtype::Float32: return MPI_FLOAT;
    case Dtype::Float64: return MPI_DOUBLE;
    case Dtype::Complex64: return MPI_C_FLOAT_COMPLEX;
    case Dtype::Complex128: return MPI_C_DOUBLE_COMPLEX;
    default: KILN_FAIL(Type, "distributed", "unsupported dtype ", dtype_name(d));
  }
}

MPI_Op nan_propagating(ReduceOp op);  // MAX and MIN of float32/float64, below

MPI_Op mpi_op(ReduceOp op, Dtype d) {
  if (d == kBool) return (op == ReduceOp::SUM || op == ReduceOp::MAX) ? MPI_MAX : MPI_MIN;  // or / and
  if ((d == kFloat32 || d == kFloat64) && (op == ReduceOp::MAX || op == ReduceOp::MIN)) return nan_propagating(op);
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return MPI_SUM;
    case ReduceOp::PRODUCT: return MPI_PROD;
    case ReduceOp::MIN: return MPI_MIN;
    case ReduceOp::MAX: return MPI_MAX;
  }
  return MPI_SUM;
}

void check_reduce(const char* op, const Tensor& t, ReduceOp r) {
  KILN_CHECK(t.defined(), Value, op, "expected a tensor");
  KILN_CHECK(t.device().is_cpu(), Value, op, "the mpi backend takes CPU tensors; got one on ", device_str(t.device()));
  if (is_complex(t.dtype()))
    KILN_CHECK(r != ReduceOp::MIN && r != ReduceOp::MAX, Value, op, "ReduceOp.", reduce_op_name(r),
               " is not defined for complex tensors (", dtype_name(t.dtype()), ")");
  if (r == ReduceOp::AVG)
    KILN_CHECK(is_floating(t.dtype()) || is_complex(t.dtype()), Value, op,
               "ReduceOp.AVG needs a floating-point or complex tensor; got ", dtype_name(t.dtype()));
}

void check_tensor(const char* op, const Tensor& t, const char* what = "tensor") {
  KILN_CHECK(t.defined(), Value, op, "expected a ", what);
  KILN_CHECK(t.device().is_cpu(), Value, op, "the mpi backend takes CPU tensors; got one on ", device_str(t.device()));
}

Dtype wire_dtype(Dtype d, bool reduce) { return reduce && reduced_in_float32(d) ? kFloat32 : d; }
// A contiguous buffer for t in its wire dtype (t itself when it already is one).
Tensor wire(const Tensor& t, bool reduce) {
  Dtype w = wire_dtype(t.dtype(), reduce);
  if (w == t.dtype() && t.is_contiguous()) return t;
  return t.to(w, /*copy=*/false).contiguous();
}
bool staged(const Tensor& buf, const Tensor& t) { return buf.impl() != t.impl(); }

// AVG: the sum divided by the group size, in the wire dtype (float32/float64/complex).
void scale(const Tensor& buf, int n) {
  int64_t k = buf.numel();
  switch (buf.dtype()) {
    case kFloat32: { auto* p = static_cast<float*>(buf.data_ptr()); for (int64_t i = 0; i < k; ++i) p[i] /= n; break; }
    case kFloat64: { auto* p = static_cast<double*>(buf.data_ptr()); for (int64_t i = 0; i < k; ++i) p[i] /= n; break; }
    case Dtype::Complex64: { auto* p = static_cast<std::complex<float>*>(buf.data_ptr()); for (int64_t i = 0; i < k; ++i) p[i] /= float(n); break; }
    case Dtype::Complex128: { auto* p = static_cast<std::complex<double>*>(buf.data_ptr()); for (int64_t i = 0; i < k; ++i) p[i] /= double(n); break; }
    default: break;
  }
}

// The flat elements of a contiguous buffer, in pieces MPI's int counts can carry.
template <class F>
void in_chunks(const Tensor& buf, F&& f) {
  constexpr int64_t kMax = int64_t(1) << 30;
  char* p = static_cast<char*>(buf.data_ptr());
  int64_t n = buf.numel(), item = static_cast<int64_t>(buf.itemsize());
  if (n == 0) return f(static_cast<void*>(p), 0);
  for (int64_t i = 0; i < n; i += kMax) f(static_cast<void*>(p + i * item), static_cast<int>(std::min(kMax, n - i)));
}

// ---- the consistency check: every rank's call, compared before any data moves ----------------------
enum Kind : int64_t { kAllReduce = 1, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kGather, kScatter, kBarrier };
const char* kind_name(int64_t k) {
  static const char* names[] = {"?", "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                                "all_to_all", "gather", "scatter", "barrier"};
  return k >= 1 && k <= 9 ? names[k] : "?";
}
struct Sig {
  int64_t kind, dtype, numel, extra;  // extra: the reduce op, or the root
};
std::string sig_str(const Sig& s) {
  std::ostringstream o;
  o << kind_name(s.kind);
  if (s.kind != kBarrier)
    o << " of " << s.numel << " " << dtype_name(static_cast<Dtype>(s.dtype)) << " elements";
  if (s.kind == kAllReduce || s.kind == kReduceScatter) o << ", " << reduce_op_name(static_cast<ReduceOp>(s.extra));
  if (s.kind == kBroadcast || s.kind == kGather || s.kind == kScatter || s.kind == kReduce) o << ", root " << s.extra;
  return o.str();
}
bool same_sig(const Sig& a, const Sig& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.numel == b.numel && a.extra == b.extra;
}

// ---- envelopes: the check, and a small all_reduce in the same messages ----------------------------------
// Every checked collective starts with one exchange of envelopes, and a small all_reduce is nothing
// else: each rank's signature (and, in a small all_reduce, its data) travels in one point-to-point
// message per round of a recursive doubling over the group's check communicator (the last ranks of a
// group whose size is not a power of two hand theirs to a partner first and get the result back). A
// rank that sees another signature, or hears of one, marks its envelope bad and stops combining data,
// but finishes the rounds: every rank learns of a mismatch in the same exchange, raises, and the group
// stays usable. Combining is commutative, so every rank ends with the same bits. The requests are
// polled, so the group's timeout can end the wait (a blocking MPI call cannot be left); MPI's own
// nonblocking collectives would do that too, but take twice as long as this for a few KB (Open MPI 4.1,
// libnbc).
using Clock = std::chrono::steady_clock;
struct Header {
  Sig sig;
  int64_t bad;    // this rank saw, or heard of, another signature
  int64_t bytes;  // of data after the header
};
constexpr int64_t kSmallAllReduce = int64_t(64) << 10;  // wire bytes of an all_reduce carried in its envelope
static_assert(sizeof(Header) + kSmallAllReduce <= ProcessGroup::kEnvelopeCapacity);
constexpr int kEnvelopeTag = 1;
using Combine = void (*)(char* dst, const char* src, int64_t bytes);

// Polls the requests to completion. Spins first (as MPI's blocking calls do), then yields the core, then
// naps; raises when the group is aborted (the watchdog's timeout failed this operation).
void wait_all(const ProcessGroup& g, MPI_Request* q, int n, MPI_Status* st, const char* op) {
  Clock::time_point t0;
  for (int i = 0;; ++i) {
    int done = 0;
    mpi_check(MPI_Testall(n, q, &done, st), op, "MPI_Testall");
    if (done) return;
    if (g.aborted()) g.check_open(op);
    if (i < 64) continue;
    if (i == 64) t0 = Clock::now();
    auto waited = Clock::now() - t0;
    if (waited < std::chrono::microseconds(200)) continue;
    if (waited < std::chrono::milliseconds(20)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// One exchange. Returns whether every rank passed `sig`; when so and combine is given, `data` (bytes
// long) holds the reduction of every rank's data.
bool exchange_envelopes(ProcessGroup& g, const Sig& sig, char* data, int64_t bytes, Combine combine, const char* op) {
  MPI_Comm c = static_cast<MPI_Comm>(g.check_comm());
  constexpr int cap = static_cast<int>(ProcessGroup::kEnvelopeCapacity);
  const int p = g.size(), me = g.rank();
  char* mine = g.envelopes();
  char* theirs = mine + cap;
  Header h{sig, 0, bytes};
  std::memcpy(mine, &h, sizeof h);
  if (bytes) std::memcpy(mine + sizeof h, data, static_cast<size_t>(bytes));
  const int len = static_cast<int>(sizeof h + static_cast<size_t>(bytes));
  MPI_Request q[2];
  MPI_Status st[2];
  auto recv = [&](int peer) { mpi_check(MPI_Irecv(theirs, cap, MPI_BYTE, peer, kEnvelopeTag, c, &q[0]), op, "MPI_Irecv"); };
  auto send = [&](int peer) { mpi_check(MPI_Isend(mine, len, MPI_BYTE, peer, kEnvelopeTag, c, &q[1]), op, "MPI_Isend"); };
  auto merge = [&] {
    int got = 0;
    MPI_Get_count(&st[0], MPI_BYTE, &got);
    Header t, m;
    std::memcpy(&t, theirs, sizeof t);
    std::memcpy(&m, mine, sizeof m);
    if (m.bad) return;
    if (t.bad || !same_sig(t.sig, m.sig) || t.bytes != m.bytes || got != len) {
      m.bad = 1;
      std::memcpy(mine, &m, sizeof m);
    } else if (bytes) {
      combine(mine + sizeof h, theirs + sizeof h, bytes);
    }
  };
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int rem = p - p2;
  if (me >= p2) {  // hand mine to the partner; the result comes back
    recv(me - p2);
    send(me - p2);
    wait_all(g, q, 2, st, op);
    int got = 0;
    MPI_Get_count(&st[0], MPI_BYTE, &got);
    std::memcpy(mine, theirs, static_cast<size_t>(got));
  } else {
    if (me < rem) {
      recv(me + p2);
      wait_all(g, q, 1, st, op);
      merge();
    }
    for (int m = 1; m < p2; m <<= 1) {
      recv(me ^ m);
      send(me ^ m);
      wait_all(g, q, 2, st, op);
      merge();
    }
    if (me < rem) {
      send(me + p2);
      wait_all(g, q + 1, 1, st + 1, op);
    }
  }
  std::memcpy(&h, mine, sizeof h);
  if (h.bad) return false;
  if (bytes) std::memcpy(data, mine + sizeof h, static_cast<size_t>(bytes));
  return true;
}

// After an exchange that found a mismatch (every rank knows): gathers the signatures to name them.
[[noreturn]] void mismatch(ProcessGroup& g, const Sig& mine, const char* op) {
  // [0]: mine, [1..]: everyone's. MPI writes there: when the wait is left at an abort it is leaked.
  auto buf = std::make_unique<Sig[]>(static_cast<size_t>(g.size()) + 1);
  buf[0] = mine;
  MPI_Request q;
  mpi_check(MPI_Iallgather(buf.get(), 4, MPI_INT64_T, buf.get() + 1, 4, MPI_INT64_T,
                           static_cast<MPI_Comm>(g.check_comm()), &q),
            op, "MPI_Iallgather");
  try {
    wait_all(g, &q, 1, MPI_STATUSES_IGNORE, op);
  } catch (...) {
    (void)buf.release();
    throw;
  }
  std::ostringstream o;
  o << "the ranks of " << g.describe() << " called different collectives:";
  for (int r = 0; r < g.size(); ++r) o << (r ? ";" : "") << " rank " << g.global_rank(r) << ": " << sig_str(buf[r + 1]);
  KILN_FAIL(Runtime, op, o.str());
}

void check_consistent(ProcessGroup& g, const Sig& mine, const char* op) {
  if (consistency_checks() && !exchange_envelopes(g, mine, nullptr, 0, nullptr, op)) mismatch(g, mine, op);
}

// ---- the reductions of a small all_reduce (commutative: both partners of a round get the same bits) ----
template <class T>
inline constexpr bool is_complex_v = false;
template <class T>
inline constexpr bool is_complex_v<std::complex<T>> = true;

template <class T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using W = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;
    return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
  } else {
    return a + b;
  }
}
template <class T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using W = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;
    return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
  } else {
    return a * b;
  }
}
// NaN wins; of two equal zeros, max takes +0 and min -0: either order gives the same bits.
template <class T>
T pick_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return std::signbit(a) ? b : a;
  }
  return a < b ? b : a;
}
template <class T>
T pick_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return std::signbit(a) ? a : b;
  }
  return b < a ? b : a;
}
// A sum or product of two NaNs keeps one operand's payload (x86: the first): one NaN for all, so that
// both partners of a round hold the same bits.
template <class T>
T canonical(T r) {
  if constexpr (std::is_floating_point_v<T>) return r != r ? std::numeric_limits<T>::quiet_NaN() : r;
  else if constexpr (is_complex_v<T>) return T(canonical(r.real()), canonical(r.imag()));
  else return r;
}

template <class T, ReduceOp R>
void combine_as(char* dst, const char* src, int64_t bytes) {
  int64_t n = bytes / static_cast<int64_t>(sizeof(T));
  T* a = reinterpret_cast<T*>(dst);
  const T* b = reinterpret_cast<const T*>(src);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (R == ReduceOp::SUM) a[i] = canonical(wrap_add(a[i], b[i]));
    else if constexpr (R == ReduceOp::PRODUCT) a[i] = canonical(wrap_mul(a[i], b[i]));
    else if constexpr (R == ReduceOp::MAX) a[i] = pick_max(a[i], b[i]);
    else a[i] = pick_min(a[i], b[i]);
  }
}
template <class T>
Combine combiner_for(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return combine_as<T, ReduceOp::SUM>;
    case ReduceOp::PRODUCT: return combine_as<T, ReduceOp::PRODUCT>;
    case ReduceOp::MAX:
      if constexpr (is_complex_v<T>) break;
      else return combine_as<T, ReduceOp::MAX>;
    case ReduceOp::MIN:
      if constexpr (is_complex_v<T>) break;
      else return combine_as<T, ReduceOp::MIN>;
  }
  KILN_FAIL(Value, "all_reduce", "ReduceOp.", reduce_op_name(op), " is not defined for complex tensors");
}
// MPI's MAX and MIN of floats keep whichever side a comparison with NaN favours, which depends on the
// algorithm's order and can differ between ranks; these take NaN (and +0 over -0 for MAX), as the
// envelopes' reductions do.
template <ReduceOp R>
void float_minmax(void* in, void* inout, int* len, MPI_Datatype* ty) {
  if (*ty == MPI_FLOAT) combine_as<float, R>(static_cast<char*>(inout), static_cast<const char*>(in), int64_t(*len) * 4);
  else combine_as<double, R>(static_cast<char*>(inout), static_cast<const char*>(in), int64_t(*len) * 8);
}
MPI_Op nan_propagating(ReduceOp op) {
  static MPI_Op ops[2] = {[] {
                            MPI_Op o;
                            MPI_Op_create(float_minmax<ReduceOp::MAX>, 1, &o);
                            return o;
                          }(),
                          [] {
                            MPI_Op o;
                            MPI_Op_create(float_minmax<ReduceOp::MIN>, 1, &o);
                            return o;
                          }()};
  return ops[op == ReduceOp::MAX ? 0 : 1];
}

// Over the wire dtype (float16/bfloat16/float8 arrive as float32).
Combine combiner(Dtype d, ReduceOp op) {
  switch (d) {
    case Dtype::Bool:  // or / and of 0 and 1
      return (op == ReduceOp::SUM || op == ReduceOp::MAX) ? combine_as<uint8_t, ReduceOp::MAX>
                                                           : combine_as<uint8_t, ReduceOp::MIN>;
    case Dtype::UInt8: return combiner_for<uint8_t>(op);
    case Dtype::Int8: return combiner_for<int8_t>(op);
    case Dtype::Int16: return combiner_for<int16_t>(op);
    case Dtype::UInt16: return combiner_for<uint16_t>(op);
    case Dtype::Int32: return combiner_for<int32_t>(op);
    case Dtype::UInt32: return combiner_for<uint32_t>(op);
    case Dtype::Int64: return combiner_for<int64_t>(op);
    case Dtype::UInt64: return combiner_for<uint64_t>(op);
    case Dtype::Float32: return combiner_for<float>(op);
    case Dtype::Float64: return combiner_for<double>(op);
    case Dtype::Complex64: return combiner_for<std::complex<float>>(op);
    case Dtype::Complex128: return combiner_for<std::complex<double>>(op);
    default: KILN_FAIL(Type, "all_reduce", "unsupported dtype ", dtype_name(d));
  }
}

}  // namespace

// ---- collectives ------------------------------------------------------------------------------------------
#define KILN_COMM static_cast<MPI_Comm>(comm_)

WorkPtr ProcessGroup::all_reduce(const Tensor& t, ReduceOp op, bool blocking) {
  check_reduce("all_reduce", t, op);
  Tensor buf = wire(t, true);
  auto w = std::make_shared<Work>("all_reduce", std::vector<Tensor>{t});
  Sig sig{kAllReduce, static_cast<int64_t>(t.dtype()), t.numel(), static_cast<int64_t>(op)};
  MPI_Comm comm = KILN_COMM;
  int n = size();
  w->epilogue = [t, buf, op, n] {
    if (op == ReduceOp::AVG) scale(buf, n);
    if (staged(buf, t)) copy_(detach(t), buf);
  };
  int64_t bytes = buf.numel() * static_cast<int64_t>(buf.itemsize());
  if (bytes <= kSmallAllReduce) {  // in its envelope (checked whether or not checks are on: it is free)
    Combine f = combiner(buf.dtype(), op);
    auto run = [this, buf, sig, bytes, f] {
      if (!exchange_envelopes(*this, sig, static_cast<char*>(buf.data_ptr()), bytes, f, "all_reduce"))
        mismatch(*this, sig, "all_reduce");
    };
    return blocking ? run_inline(w, std::move(run)) : submit(w, std::move(run), true);
  }
  return submit(w, [this, buf, sig, op, comm] {
    check_consistent(*this, sig, "all_reduce");
    MPI_Datatype ty = mpi_type(buf.dtype());
    MPI_Op mop = mpi_op(op, buf.dtype());
    in_chunks(buf, [&](void* p, int c) {
      if (c) mpi_check(MPI_Allreduce(MPI_IN_PLACE, p, c, ty, mop, comm), "all_reduce", "MPI_Allreduce");
    });
  }, true);
}

WorkPtr ProcessGroup::broadcast(const Tensor& t, int root) {
  check_tensor("broadcast", t);
  KILN_CHECK(root >= 0 && root < size(), Value, "broadcast", "root ", root, " is not a rank of ", describe());
  Tensor buf = wire(t, false);
  auto w = std::make_shared<Work>("broadcast", std::vector<Tensor>{t});
  if (staged(buf, t) && root != rank_) w->epilogue = [t, buf] { copy_(detach(t), buf); };
  Sig sig{kBroadcast, static_cast<int64_t>(t.dtype()), t.numel(), root};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, buf, sig, root, comm] {
    check_consistent(*this, sig, "broadcast");
    MPI_Datatype ty = mpi_type(buf.dtype());
    in_chunks(buf, [&](void* p, int c) {
      if (c) mpi_check(MPI_Bcast(p, c, ty, root, comm), "broadcast", "MPI_Bcast");
    });
  }, true);
}

WorkPtr ProcessGroup::reduce(const Tensor& t, int root, ReduceOp op) {
  check_reduce("reduce", t, op);
  KILN_CHECK(root >= 0 && root < size(), Value, "reduce", "root ", root, " is not a rank of ", describe());
  Tensor buf = wire(t, true);
  auto w = std::make_shared<Work>("reduce", std::vector<Tensor>{t});
  int n = size();
  bool is_root = root == rank_;
  if (is_root)
    w->epilogue = [t, buf, op, n] {
      if (op == ReduceOp::AVG) scale(buf, n);
      if (staged(buf, t)) copy_(detach(t), buf);
    };
  Sig sig{kReduce, static_cast<int64_t>(t.dtype()), t.numel(), root * 8 + static_cast<int64_t>(op)};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, buf, sig, root, op, is_root, comm] {
    check_consistent(*this, sig, "reduce");
    MPI_Datatype ty = mpi_type(buf.dtype());
    MPI_Op mop = mpi_op(op, buf.dtype());
    in_chunks(buf, [&](void* p, int c) {
      if (c)
        mpi_check(MPI_Reduce(is_root ? MPI_IN_PLACE : p, is_root ? p : nullptr, c, ty, mop, root, comm),
                  "reduce", "MPI_Reduce");
    });
  }, true);
}

namespace {
// Checks a list of `n` tensors of `numel` elements and dtype d each.
void check_list(const char* op, const std::vector<Tensor>& ts, size_t n, int64_t numel, Dtype d, const char* what) {
  KILN_CHECK(ts.size() == n, Value, op, "expected ", n, " ", what, " tensors (one per rank), got ", ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    check_tensor(op, ts[i], what);
    KILN_CHECK(ts[i].dtype() == d, Type, op, what, " tensor ", i, " has dtype ", dtype_name(ts[i].dtype()),
               "; expected ", dtype_name(d));
    if (numel >= 0)
      KILN_CHECK(ts[i].numel() == numel, Value, op, what, " tensor ", i, " has ", ts[i].numel(),
                 " elements; expected ", numel);
  }
}
// Copies the pieces of a flat buffer (laid out one after another) into the tensors.
void unpack(const Tensor& flat, const std::vector<Tensor>& outs) {
  int64_t off = 0;
  for (const Tensor& o : outs) {
    int64_t k = o.numel();
    if (k) copy_(detach(o), flat.narrow(0, off, k).view(o.sizes()));
    off += k;
  }
}
Tensor flat_cat(const std::vector<Tensor>& ins, Dtype w) {
  TensorList parts;
  for (const Tensor& t : ins) parts.push_back(t.reshape({t.numel()}).to(w));
  return parts.empty() ? empty({0}, w) : cat(parts, 0).contiguous();
}
}  // namespace

WorkPtr ProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_tensor("all_gather", input);
  check_list("all_gather", outputs, size(), input.numel(), input.dtype(), "output");
  Tensor in = wire(input, false);
  Tensor flat = empty({input.numel() * size()}, input.dtype());
  auto w = std::make_shared<Work>("all_gather", outputs);
  w->epilogue = [flat, outputs] { unpack(flat, outputs); };
  Sig sig{kAllGather, static_cast<int64_t>(input.dtype()), input.numel(), 0};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, in, flat, sig, comm] {
    check_consistent(*this, sig, "all_gather");
    int c = count_of(in.numel(), "all_gather");
    mpi_check(MPI_Allgather(in.data_ptr(), c, mpi_type(in.dtype()), flat.data_ptr(), c, mpi_type(in.dtype()), comm),
              "all_gather", "MPI_Allgather");
  }, true);
}

WorkPtr ProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  check_tensor("all_gather_into_tensor", input);
  check_tensor("all_gather_into_tensor", output, "output");
  KILN_CHECK(output.dtype() == input.dtype(), Type, "all_gather_into_tensor", "output dtype ",
             dtype_name(output.dtype()), " differs from input dtype ", dtype_name(input.dtype()));
  KILN_CHECK(output.numel() == input.numel() * size(), Value, "all_gather_into_tensor", "output has ",
             output.numel(), " elements; expected world size (", size(), ") times the input's ", input.numel());
  Tensor in = wire(input, false), out = wire(output, false);
  auto w = std::make_shared<Work>("all_gather_into_tensor", std::vector<Tensor>{output});
  if (staged(out, output)) w->epilogue = [out, output] { copy_(detach(output), out); };
  Sig sig{kAllGather, static_cast<int64_t>(input.dtype()), input.numel(), 0};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, in, out, sig, comm] {
    check_consistent(*this, sig, "all_gather_into_tensor");
    int c = count_of(in.numel(), "all_gather_into_tensor");
    mpi_check(MPI_Allgather(in.data_ptr(), c, mpi_type(in.dtype()), out.data_ptr(), c, mpi_type(in.dtype()), comm),
              "all_gather_into_tensor", "MPI_Allgather");
  }, true);
}

WorkPtr ProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  check_reduce("reduce_scatter", output, op);
  check_list("reduce_scatter", inputs, size(), output.numel(), output.dtype(), "input");
  return reduce_scatter_flat("reduce_scatter", output, flat_cat(inputs, wire_dtype(output.dtype(), true)), op);
}

WorkPtr ProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_reduce("reduce_scatter_tensor", output, op);
  check_tensor("reduce_scatter_tensor", input);
  KILN_CHECK(output.dtype() == input.dtype(), Type, "reduce_scatter_tensor", "output dtype ",
             dtype_name(output.dtype()), " differs from input dtype ", dtype_name(input.dtype()));
  KILN_CHECK(input.numel() == output.numel() * size(), Value, "reduce_scatter_tensor", "input has ",
             input.numel(), " elements; expected world size (", size(), ") times the output's ", output.numel());
  return reduce_scatter_flat("reduce_scatter_tensor", output, wire(input, true), op);
}

// `send`: every rank's block one after another, contiguous, in the wire dtype.
WorkPtr ProcessGroup::reduce_scatter_flat(const char* name, const Tensor& output, const Tensor& send, ReduceOp op) {
  Tensor out = wire(output, true);
  auto w = std::make_shared<Work>(name, std::vector<Tensor>{output});
  int n = size();
  w->epilogue = [out, output, op, n] {
    if (op == ReduceOp::AVG) scale(out, n);
    if (staged(out, output)) copy_(detach(output), out);
  };
  Sig sig{kReduceScatter, static_cast<int64_t>(output.dtype()), output.numel(), static_cast<int64_t>(op)};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, send, out, sig, op, comm, name] {
    check_consistent(*this, sig, name);
    int c = count_of(out.numel(), name);
    mpi_check(MPI_Reduce_scatter_block(send.data_ptr(), out.data_ptr(), c, mpi_type(out.dtype()),
                                       mpi_op(op, out.dtype()), comm),
              name, "MPI_Reduce_scatter_block");
  }, true);
}

namespace {
// all_to_all with per-peer element counts; checks (when on) that what each rank sends matches what its
// peer expects.
void alltoallv(MPI_Comm comm, ProcessGroup& g, const char* op, const Tensor& send, const std::vector<int>& sc,
               const Tensor& recv, const std::vector<int>& rc) {
  int n = g.size();
  std::vector<int> sd(n), rd(n);
  for (int i = 1; i < n; ++i) sd[i] = sd[i - 1] + sc[i - 1], rd[i] = rd[i - 1] + rc[i - 1];
  Sig sig{kAllToAll, static_cast<int64_t>(send.dtype()), 0, 0};
  check_consistent(g, sig, op);
  if (consistency_checks()) {
    std::vector<int> told(n);
    mpi_check(MPI_Alltoall(sc.data(), 1, MPI_INT, told.data(), 1, MPI_INT, comm), op, "MPI_Alltoall");
    int bad = 0;
    for (int i = 0; i < n; ++i) bad |= told[i] != rc[i];
    int any = 0;
    mpi_check(MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm), op, "MPI_Allreduce");
    if (any) {
      std::ostringstream o;
      o << "split sizes disagree across the ranks of " << g.describe();
      for (int i = 0; i < n; ++i)
        if (told[i] != rc[i])
          o << "; rank " << g.global_rank(i) << " sends " << told[i] << " elements to rank "
            << g.global_rank(g.rank()) << ", which expects " << rc[i];
      KILN_FAIL(Runtime, op, o.str());
    }
  }
  MPI_Datatype ty = mpi_type(send.dtype());
  mpi_check(MPI_Alltoallv(send.data_ptr(), sc.data(), sd.data(), ty, recv.data_ptr(), rc.data(), rd.data(), ty, comm),
            op, "MPI_Alltoallv");
}
}  // namespace

WorkPtr ProcessGroup::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  KILN_CHECK(!inputs.empty(), Value, "all_to_all", "expected ", size(), " input tensors, got 0");
  Dtype d = inputs[0].dtype();
  check_list("all_to_all", inputs, size(), -1, d, "input");
  check_list("all_to_all", outputs, size(), -1, d, "output");
  std::vector<int> sc(size()), rc(size());
  int64_t rtotal = 0;
  for (int i = 0; i < size(); ++i) {
    sc[i] = count_of(inputs[i].numel(), "all_to_all");
    rc[i] = count_of(outputs[i].numel(), "all_to_all");
    rtotal += rc[i];
  }
  Tensor send = flat_cat(inputs, d), recv = empty({rtotal}, d);
  auto w = std::make_shared<Work>("all_to_all", outputs);
  w->epilogue = [recv, outputs] { unpack(recv, outputs); };
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, send, recv, sc, rc, comm] { alltoallv(comm, *this, "all_to_all", send, sc, recv, rc); }, true);
}

WorkPtr ProcessGroup::all_to_all_single(const Tensor& output, const Tensor& input, const Shape& osplit,
                                        const Shape& isplit) {
  const char* op = "all_to_all_single";
  check_tensor(op, input);
  check_tensor(op, output, "output");
  KILN_CHECK(output.dtype() == input.dtype(), Type, op, "output dtype ", dtype_name(output.dtype()),
             " differs from input dtype ", dtype_name(input.dtype()));
  int n = size();
  auto splits = [&](const Tensor& t, const Shape& s, const char* what) {
    std::vector<int> c(n);
    int64_t rows = t.dim() ? t.size(0) : 1, row = rows ? t.numel() / rows : 0;
    if (s.empty()) {
      KILN_CHECK(rows % n == 0, Value, op, what, " tensor's first dimension (", rows,
                 ") does not divide evenly by the world size (", n, "); pass split sizes");
      for (int i = 0; i < n; ++i) c[i] = count_of(rows / n * row, op);
    } else {
      KILN_CHECK(static_cast<int>(s.size()) == n, Value, op, what, " split sizes have ", s.size(),
                 " entries; expected one per rank (", n, ")");
      int64_t sum = 0;
      for (int i = 0; i < n; ++i) {
        KILN_CHECK(s[i] >= 0, Value, op, what, " split size ", i, " is negative (", s[i], ")");
        sum += s[i];
        c[i] = count_of(s[i] * row, op);
      }
      KILN_CHECK(sum == rows, Value, op, what, " split sizes sum to ", sum, " but the ", what,
                 " tensor has ", rows, " rows");
    }
    return c;
  };
  std::vector<int> sc = splits(input, isplit, "input"), rc = splits(output, osplit, "output");
  Tensor send = wire(input, false), recv = wire(output, false);
  auto w = std::make_shared<Work>(op, std::vector<Tensor>{output});
  if (staged(recv, output)) w->epilogue = [recv, output] { copy_(detach(output), recv); };
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, send, recv, sc, rc, comm, op] { alltoallv(comm, *this, op, send, sc, recv, rc); }, true);
}

WorkPtr ProcessGroup::gather(const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_tensor("gather", input);
  KILN_CHECK(root >= 0 && root < size(), Value, "gather", "root ", root, " is not a rank of ", describe());
  bool is_root = root == rank_;
  if (is_root) check_list("gather", outputs, size(), input.numel(), input.dtype(), "output");
  else KILN_CHECK(outputs.empty(), Value, "gather", "gather_list must be given on the destination rank only");
  Tensor in = wire(input, false);
  Tensor flat = is_root ? empty({input.numel() * size()}, input.dtype()) : Tensor();
  auto w = std::make_shared<Work>("gather", outputs);
  if (is_root) w->epilogue = [flat, outputs] { unpack(flat, outputs); };
  Sig sig{kGather, static_cast<int64_t>(input.dtype()), input.numel(), root};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, in, flat, sig, root, comm] {
    check_consistent(*this, sig, "gather");
    int c = count_of(in.numel(), "gather");
    MPI_Datatype ty = mpi_type(in.dtype());
    mpi_check(MPI_Gather(in.data_ptr(), c, ty, flat.defined() ? flat.data_ptr() : nullptr, c, ty, root, comm),
              "gather", "MPI_Gather");
  }, true);
}

WorkPtr ProcessGroup::scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  check_tensor("scatter", output, "output");
  KILN_CHECK(root >= 0 && root < size(), Value, "scatter", "root ", root, " is not a rank of ", describe());
  bool is_root = root == rank_;
  if (is_root) check_list("scatter", inputs, size(), output.numel(), output.dtype(), "input");
  else KILN_CHECK(inputs.empty(), Value, "scatter", "scatter_list must be given on the source rank only");
  Tensor send = is_root ? flat_cat(inputs, output.dtype()) : Tensor();
  Tensor out = wire(output, false);
  auto w = std::make_shared<Work>("scatter", std::vector<Tensor>{output});
  if (staged(out, output)) w->epilogue = [out, output] { copy_(detach(output), out); };
  Sig sig{kScatter, static_cast<int64_t>(output.dtype()), output.numel(), root};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, send, out, sig, root, comm] {
    check_consistent(*this, sig, "scatter");
    int c = count_of(out.numel(), "scatter");
    MPI_Datatype ty = mpi_type(out.dtype());
    mpi_check(MPI_Scatter(send.defined() ? send.data_ptr() : nullptr, c, ty, out.data_ptr(), c, ty, root, comm),
              "scatter", "MPI_Scatter");
  }, true);
}

WorkPtr ProcessGroup::barrier() {
  auto w = std::make_shared<Work>("barrier");
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, comm] {
    check_consistent(*this, Sig{kBarrier, 0, 0, 0}, "barrier");
    mpi_check(MPI_Barrier(comm), "barrier", "MPI_Barrier");
  }, true);
}

// Point to point: the communication thread posts the request and waits for it polling, so that a send
// and a receive issued back to back on two ranks cannot block each other's thread for good (it also
// keeps the group's later operations behind it, in order).
WorkPtr ProcessGroup::send(const Tensor& t, int dst, int tag) {
  check_tensor("send", t);
  KILN_CHECK(dst >= 0 && dst < size() && dst != rank_, Value, "send", "destination rank ", dst,
             " is not another rank of ", describe());
  KILN_CHECK(tag >= 0, Value, "send", "tag must be non-negative, got ", tag);
  Tensor buf = wire(t, false);
  auto w = std::make_shared<Work>("send", std::vector<Tensor>{t});
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, w, buf, dst, tag, comm] {
    auto* r = new MPI_Request;
    int rc = MPI_Isend(buf.data_ptr(), count_of(buf.numel(), "send"), mpi_type(buf.dtype()), dst, tag, comm, r);
    if (rc != MPI_SUCCESS) delete r;
    mpi_check(rc, "send", "MPI_Isend");
    add_inflight(r, w, [buf](int, int) {});  // keeps the buffer alive until MPI is done with it
  }, false, true);
}

WorkPtr ProcessGroup::recv(const Tensor& t, int src, int tag) {
  check_tensor("recv", t);
  KILN_CHECK(src == -1 || (src >= 0 && src < size() && src != rank_), Value, "recv", "source rank ", src,
             " is not another rank of ", describe());
  Tensor buf = wire(t, false);
  auto w = std::make_shared<Work>("recv", std::vector<Tensor>{t});
  w->epilogue = [buf, t] {
    if (staged(buf, t)) copy_(detach(t), buf);
  };
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, w, buf, src, tag, comm] {
    auto* r = new MPI_Request;
    int rc = MPI_Irecv(buf.data_ptr(), count_of(buf.numel(), "recv"), mpi_type(buf.dtype()),
                       src < 0 ? MPI_ANY_SOURCE : src, tag, comm, r);
    if (rc != MPI_SUCCESS) delete r;
    mpi_check(rc, "recv", "MPI_Irecv");
    add_inflight(r, w, [w, buf](int source, int bytes) {
      int64_t want = buf.numel() * static_cast<int64_t>(buf.itemsize());
      KILN_CHECK(bytes == want, Runtime, "recv", "received ", bytes, " bytes from rank ", source,
                 "; the receiving tensor has ", want);
      w->source = source;
    });
  }, false, true);
}

#undef KILN_COMM

}  // namespace kiln::distributed
