// libFuzzer target (issue 14): the safetensors reader on arbitrary bytes. It must raise kiln::Error
// (a "[safetensors]" ValueError) or give tensors whose every byte lies in the input; what it accepts
// must survive a round trip (save, load again: the same names, dtypes, shapes and bytes). Anything
// else — a signal, an ASan/UBSan report, another exception escaping — is a finding.
#include <cstring>
#include <vector>

#include "kiln/io/safetensors.h"
#include "kiln/kiln.h"

using namespace kiln;

namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = contiguous(t);
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.numel() * c.itemsize());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsContents got;
  try {
    got = load_with_metadata(data, size);
  } catch (const Error&) {
    return 0;
  }
  const TensorMap again = load(save(got.tensors, got.metadata));
  if (again.size() != got.tensors.size()) __builtin_trap();
  for (const auto& [name, t] : got.tensors) {
    const Tensor& u = again.at(name);
    if (u.dtype() != t.dtype() || u.sizes() != t.sizes() || bytes_of(u) != bytes_of(t)) __builtin_trap();
  }
  return 0;
}
