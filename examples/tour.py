"""A short tour of kiln's tensor core (the training quickstart arrives with the autograd/nn issue)."""
import time

import kiln

print(f"kiln {kiln.__version__}  ISA={kiln.cpu_isa()}  threads={kiln.get_num_threads()}")

x = kiln.arange(12, dtype=kiln.float32).reshape(3, 4)
print("x =", x)
print("x.T (a view, no copy):", x.T.shape, x.T.stride(), "contiguous:", x.T.is_contiguous())
print("x[1:, ::2] =", x[1:, ::2])
print("x[x > 5] =", x[x > 5])
print("broadcast x + [10, 20, 30, 40] =", x + kiln.tensor([10.0, 20.0, 30.0, 40.0]))
print("promotion int32 + 2.5 ->", (kiln.ones(2, dtype=kiln.int32) + 2.5).dtype)
print("sum over dim 0:", x.sum(0), " mean:", x.mean().item())
print("softmax:", kiln.softmax(x, dim=1))
print("bfloat16:", x.to(kiln.bfloat16) * 1.001)

kiln.manual_seed(0)
a, b = kiln.randn(512, 512), kiln.randn(512, 512)
t0 = time.perf_counter()
for _ in range(10):
    c = a @ b
dt = (time.perf_counter() - t0) / 10
print(f"512x512 matmul: {2 * 512**3 / dt / 1e9:.1f} GFLOP/s")

n = x.numpy()  # shares memory
n[0, 0] = 100.0
print("numpy view shares memory:", x[0, 0].item())
print("memory:", {k: v for k, v in kiln.memory_stats().items() if "current" in k})
