// A byte reader for the fuzz targets: every read succeeds (zeros once the input is used up), so any
// input decodes to some call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kiln_fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}

  uint8_t byte() { return n_ ? (--n_, *p_++) : 0; }

  // An integer drawn the way size and stride bugs hide: small values mostly, then the edges of the
  // 32- and 64-bit ranges, then any 64-bit value.
  int64_t integer() {
    static constexpr int64_t kEdges[] = {0, 1, -1, 2, 3, INT32_MAX, int64_t(1) << 31, int64_t(1) << 32,
                                         int64_t(1) << 62, INT64_MAX, INT64_MIN, -(int64_t(1) << 62),
                                         (int64_t(1) << 62) + 1, int64_t(1) << 40};
    const uint8_t tag = byte();
    switch (tag % 4) {
      case 0: return static_cast<int8_t>(byte()) % 9;
      case 1: return static_cast<int16_t>(byte() | (byte() << 8));
      case 2: return kEdges[byte() % (sizeof(kEdges) / sizeof(kEdges[0]))];
      default: {
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v |= uint64_t(byte()) << (8 * i);
        return static_cast<int64_t>(v);
      }
    }
  }

  size_t left() const { return n_; }
  const uint8_t* rest() const { return p_; }

 private:
  const uint8_t* p_;
  size_t n_;
};

}  // namespace kiln_fuzz
