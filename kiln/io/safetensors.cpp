// safetensors reader and writer: a small JSON reader/writer for the header's restricted grammar,
// the header validation, and the mmap-backed loader. See safetensors.h for the format and the
// guarantees.
#include "kiln/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

#include "kiln/core/stream.h"

namespace kiln {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

constexpr const char* kOp = "safetensors";
constexpr uint64_t kMaxHeader = 100'000'000;  // the reference implementation's limit
constexpr int kMaxDepth = 128;  // nesting limit for skipped JSON values (as serde_json)

// ---- dtype codes --------------------------------------------------------------------------------
// rank: position in the reference's Dtype enum; the writer orders tensors by rank descending, then
// by name, which keeps every tensor aligned to its itemsize.
struct DtypeCode {
  const char* code;
  int rank;
  Dtype dtype;  // Undefined: a valid safetensors code kiln has no dtype for
};
constexpr DtypeCode kCodes[] = {
    {"BOOL", 0, kBool},
    {"F4", 1, Dtype::Undefined},
    {"F6_E2M3", 2, Dtype::Undefined},
    {"F6_E3M2", 3, Dtype::Undefined},
    {"U8", 4, kUInt8},
    {"I8", 5, kInt8},
    {"F8_E5M2", 6, kFloat8_e5m2},
    {"F8_E4M3", 7, kFloat8_e4m3fn},
    {"F8_E8M0", 8, Dtype::Undefined},
    {"F8_E4M3FNUZ", 9, Dtype::Undefined},
    {"F8_E5M2FNUZ", 10, Dtype::Undefined},
    {"I16", 11, kInt16},
    {"U16", 12, kUInt16},
    {"F16", 13, kFloat16},
    {"BF16", 14, kBFloat16},
    {"I32", 15, kInt32},
    {"U32", 16, kUInt32},
    {"F32", 17, kFloat32},
    {"C64", 18, kComplex64},
    {"F64", 19, kFloat64},
    {"I64", 20, kInt64},
    {"U64", 21, kUInt64},
};

const DtypeCode& code_of(Dtype d, const std::string& name) {
  for (const auto& c : kCodes)
    if (c.dtype == d) return c;
  KILN_FAIL(Value, kOp, "tensor '", name, "' has dtype ", dtype_name(d),
            ", which safetensors cannot store (the format has no code for it)");
}

// ---- UTF-8 --------------------------------------------------------------------------------------
// Index of the first byte that is not part of a valid UTF-8 sequence (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or npos.
size_t invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  auto cont = [&](size_t k) { return k < n && (p[k] & 0xC0) == 0x80; };
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + 1 >= n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (!cont(i + k)) return i;
    i += len;
  }
  return std::string_view::npos;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// ---- JSON reader --------------------------------------------------------------------------------
// A cursor over the (UTF-8 validated) header. Strings, non-negative integers, objects and arrays
// are read where the schema expects them; any other valid JSON value is accepted only where it is
// skipped.
class JsonReader {
 public:
  JsonReader(std::string_view text, const std::string& where)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), where_(where) {}

  [[noreturn]] void fail(const std::string& what) const {
    KILN_FAIL(Value, kOp, where_, ": invalid header JSON at byte ", p_ - begin_, ": ", what);
  }
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool at_end() { return ws(), p_ == end_; }
  // Skips whitespace; consumes c and returns true when it is next.
  bool accept(char c) {
    ws();
    if (p_ < end_ && *p_ == c) return ++p_, true;
    return false;
  }
  void expect(char c, const char* context) {
    if (!accept(c)) fail(std::string("expected '") + c + "' " + context);
  }
  bool next_is(char c) { return ws(), p_ < end_ && *p_ == c; }
  bool accept_literal(std::string_view lit) {
    ws();
    if (static_cast<size_t>(end_ - p_) >= lit.size() && std::string_view(p_, lit.size()) == lit) {
      p_ += lit.size();
      return true;
    }
    return false;
  }

  std::string string(const char* context) {
    if (!accept('"')) fail(std::string("expected a string ") + context);
    std::string out;
    while (true) {
      if (p_ == end_) fail("unterminated string");
      char c = *p_++;
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ == end_) fail("unterminated escape");
      switch (char e = *p_++) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u')
              fail("lone high surrogate in \\u escape");
            p_ += 2;
            uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("invalid surrogate pair in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --p_, fail("invalid escape");
      }
    }
  }

  // A JSON number token; returns it with flags for sign and fraction/exponent.
  std::string_view number_token(bool& negative, bool& integral) {
    ws();
    const char* start = p_;
    negative = p_ < end_ && *p_ == '-';
    if (negative) ++p_;
    auto digit = [&] { return p_ < end_ && *p_ >= '0' && *p_ <= '9'; };
    if (!digit()) fail("invalid number");
    if (*p_ == '0') {
      ++p_;
      if (digit()) fail("invalid number (leading zero)");
    } else {
      while (digit()) ++p_;
    }
    integral = true;
    if (p_ < end_ && *p_ == '.') {
      ++p_, integral = false;
      if (!digit()) fail("invalid number");
      while (digit()) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_, integral = false;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digit()) fail("invalid number");
      while (digit()) ++p_;
    }
    return {start, static_cast<size_t>(p_ - start)};
  }

  uint64_t uint(const std::string& context) {
    ws();
    if (p_ == end_ || !(*p_ == '-' || (*p_ >= '0' && *p_ <= '9')))
      fail(context + " must be a non-negative integer");
    bool negative, integral;
    std::string_view tok = number_token(negative, integral);
    if (!integral) fail(context + " must be an integer, got " + std::string(tok));
    if (negative) fail(context + " must be non-negative, got " + std::string(tok));
    uint64_t v = 0;
    for (char c : tok)
      if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, uint64_t(c - '0'), &v))
        fail(context + " is too large: " + std::string(tok));
    return v;
  }

  std::vector<uint64_t> uint_array(const std::string& context) {
    expect('[', ("for " + context).c_str());
    std::vector<uint64_t> out;
    if (accept(']')) return out;
    do out.push_back(uint(context));
    while (accept(','));
    expect(']', ("closing " + context).c_str());
    return out;
  }

  // Skips any JSON value (unknown fields are ignored, as the reference does).
  void skip(int depth = 0) {
    if (depth >= kMaxDepth) fail("nesting too deep");
    ws();
    if (p_ == end_) fail("expected a value");
    char c = *p_;
    if (c == '{') {
      ++p_;
      if (accept('}')) return;
      do {
        string("as object key");
        expect(':', "after object key");
        skip(depth + 1);
      } while (accept(','));
      expect('}', "closing object");
    } else if (c == '[') {
      ++p_;
      if (accept(']')) return;
      do skip(depth + 1);
      while (accept(','));
      expect(']', "closing array");
    } else if (c == '"') {
      string("");
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      bool n, i;
      number_token(n, i);
    } else if (!accept_literal("true") && !accept_literal("false") && !accept_literal("null")) {
      fail("expected a value");
    }
  }

 private:
  uint32_t hex4() {
    if (end_ - p_ < 4) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = *p_++;
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) fail("invalid \\u escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  const std::string& where_;
};

// ---- JSON writer (the reference's compact form and escapes) -------------------------------------
void write_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// ---- header parsing and validation --------------------------------------------------------------
struct Entry {
  Dtype dtype = Dtype::Undefined;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::map<std::string, Entry> entries;
  MetadataMap metadata;
  size_t data_start = 0;  // 8 + header length
};

Entry parse_entry(JsonReader& r, const std::string& name) {
  const std::string ctx = "tensor '" + name + "'";
  if (!r.next_is('{')) r.fail(ctx + ": expected an object with dtype, shape and data_offsets");
  r.expect('{', "");
  Entry e;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  if (!r.accept('}')) {
    do {
      std::string field = r.string(("as a field name of " + ctx).c_str());
      r.expect(':', "after field name");
      auto once = [&](bool& seen) {
        if (seen) r.fail(ctx + ": duplicate field '" + field + "'");
        seen = true;
      };
      if (field == "dtype") {
        once(has_dtype);
        std::string code = r.string(("as dtype of " + ctx).c_str());
        const DtypeCode* found = nullptr;
        for (const auto& c : kCodes)
          if (code == c.code) found = &c;
        if (!found) r.fail(ctx + ": unknown dtype '" + code + "'");
        if (found->dtype == Dtype::Undefined)
          r.fail(ctx + ": dtype " + code + " is not supported by kiln");
        e.dtype = found->dtype;
      } else if (field == "shape") {
        once(has_shape);
        for (uint64_t d : r.uint_array(ctx + " shape entry")) {
          if (d > static_cast<uint64_t>(INT64_MAX))
            r.fail(ctx + ": dimension " + std::to_string(d) + " is too large");
          e.shape.push_back(static_cast<int64_t>(d));
        }
      } else if (field == "data_offsets") {
        once(has_offsets);
        auto off = r.uint_array(ctx + " data_offsets entry");
        if (off.size() != 2)
          r.fail(ctx + ": data_offsets must hold 2 integers, got " + std::to_string(off.size()));
        e.begin = off[0], e.end = off[1];
      } else {
        r.skip();
      }
    } while (r.accept(','));
    r.expect('}', ("closing " + ctx).c_str());
  }
  if (!has_dtype) r.fail(ctx + ": missing field 'dtype'");
  if (!has_shape) r.fail(ctx + ": missing field 'shape'");
  if (!has_offsets) r.fail(ctx + ": missing field 'data_offsets'");
  return e;
}

void parse_metadata(JsonReader& r, MetadataMap& meta) {
  if (r.accept_literal("null")) return;
  if (!r.next_is('{')) r.fail("__metadata__ must be an object of strings");
  r.expect('{', "");
  if (r.accept('}')) return;
  do {
    std::string key = r.string("as a __metadata__ key");
    r.expect(':', "after __metadata__ key");
    if (!r.next_is('"')) r.fail("__metadata__ value for '" + key + "' must be a string");
    if (meta.count(key)) r.fail("duplicate __metadata__ key '" + key + "'");
    std::string value = r.string("");
    meta.emplace(std::move(key), std::move(value));
  } while (r.accept(','));
  r.expect('}', "closing __metadata__");
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Header parse_header(const uint8_t* data, size_t size, const std::string& where) {
  KILN_CHECK(size >= 8, Value, kOp, where, ": too short for a safetensors file (", size,
             " bytes; the header length alone takes 8)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  KILN_CHECK(n <= kMaxHeader, Value, kOp, where, ": header length ", n,
             " exceeds the 100 MB limit");
  KILN_CHECK(n <= size - 8, Value, kOp, where, ": header length ", n, " is larger than the file (",
             size, " bytes)");
  std::string_view text(reinterpret_cast<const char*>(data) + 8, n);
  size_t bad = invalid_utf8(text);
  KILN_CHECK(bad == std::string_view::npos, Value, kOp, where, ": header is not valid UTF-8 (byte ",
             bad, ")");

  Header h;
  h.data_start = 8 + n;
  JsonReader r(text, where);
  if (!r.next_is('{')) r.fail("the header must be a JSON object");
  r.expect('{', "");
  bool has_meta = false;
  if (!r.accept('}')) {
    do {
      std::string key = r.string("as a tensor name");
      r.expect(':', "after tensor name");
      if (key == "__metadata__") {
        if (has_meta) r.fail("duplicate key '__metadata__'");
        has_meta = true;
        parse_metadata(r, h.metadata);
      } else {
        if (h.entries.count(key)) r.fail("duplicate tensor name '" + key + "'");
        Entry e = parse_entry(r, key);
        h.entries.emplace(std::move(key), std::move(e));
      }
    } while (r.accept(','));
    r.expect('}', "closing the header object");
  }
  if (!r.at_end()) r.fail("trailing characters after the header object");

  // Byte ranges: in offset order they must follow each other exactly and cover the data section.
  std::vector<const std::pair<const std::string, Entry>*> order;
  order.reserve(h.entries.size());
  for (const auto& kv : h.entries) order.push_back(&kv);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return std::pair(a->second.begin, a->second.end) < std::pair(b->second.begin, b->second.end);
  });
  uint64_t expected = 0;
  for (const auto* kv : order) {
    const std::string& name = kv->first;
    const Entry& e = kv->second;
    KILN_CHECK(e.begin == expected && e.end >= e.begin, Value, kOp, where, ": tensor '", name,
               "' has invalid data_offsets [", e.begin, ", ", e.end, "] (expected it to begin at ",
               expected, ": tensors must be contiguous and must not overlap)");
    uint64_t nbytes = kiln::itemsize(e.dtype);
    for (int64_t d : e.shape)
      KILN_CHECK(!__builtin_mul_overflow(nbytes, static_cast<uint64_t>(d), &nbytes), Value, kOp,
                 where, ": tensor '", name, "' shape ", shape_str(e.shape),
                 " overflows the byte size");
    KILN_CHECK(nbytes == e.end - e.begin, Value, kOp, where, ": tensor '", name, "' of dtype ",
               dtype_name(e.dtype), " and shape ", shape_str(e.shape), " needs ", nbytes,
               " bytes but data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin);
    expected = e.end;
  }
  uint64_t have = size - h.data_start;
  KILN_CHECK(expected == have, Value, kOp, where, ": tensors cover ", expected,
             " bytes but the data section holds ", have, " bytes");
  return h;
}

// ---- materialising tensors ----------------------------------------------------------------------
// A mapped file shared by the tensors viewing it; unmapped when the last one dies.
struct Mapping {
  void* base = nullptr;
  size_t len = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base) munmap(base, len);
  }
};
using MappingRef = std::shared_ptr<Mapping>;

void release_mapping(void*, size_t, void* ctx) { delete static_cast<MappingRef*>(ctx); }

bool bools_normal(const uint8_t* p, size_t n) {
  uint8_t acc = 0;
  for (size_t i = 0; i < n; ++i) acc |= p[i];
  return acc <= 1;
}

Tensor copy_out(const Entry& e, const uint8_t* src, size_t nbytes) {
  Tensor t = make_tensor(e.shape, e.dtype);
  auto* dst = static_cast<uint8_t*>(t.data_ptr());
  if (e.dtype == kBool) {
    for (size_t i = 0; i < nbytes; ++i) dst[i] = src[i] != 0;
  } else if (nbytes) {
    std::memcpy(dst, src, nbytes);
  }
  return t;
}

// A zero-copy view into the mapping when aligned (and, for BOOL, holding only 0/1), else a copy.
Tensor view_or_copy(const Entry& e, uint8_t* src, size_t nbytes, const MappingRef* mapping) {
  if (nbytes == 0 || !mapping) return copy_out(e, src, nbytes);
  if (reinterpret_cast<uintptr_t>(src) % kiln::itemsize(e.dtype) != 0)
    return copy_out(e, src, nbytes);
  if (e.dtype == kBool && !bools_normal(src, nbytes)) return copy_out(e, src, nbytes);
  auto holder = std::make_unique<MappingRef>(*mapping);
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = e.shape;
  impl->strides = contiguous_strides(e.shape);
  impl->dtype = e.dtype;
  impl->storage = std::make_shared<Storage>(src, nbytes, kCPU, &release_mapping, holder.get());
  holder.release();  // the storage owns it now
  impl->refresh();
  return Tensor(std::move(impl));
}

SafetensorsContents materialise(uint8_t* data, size_t size, const std::string& where,
                                const MappingRef* mapping) {
  Header h = parse_header(data, size, where);
  SafetensorsContents out;
  out.metadata = std::move(h.metadata);
  for (auto& [name, e] : h.entries) {
    uint8_t* src = data + h.data_start + e.begin;
    out.tensors.emplace(name, view_or_copy(e, src, e.end - e.begin, mapping));
  }
  return out;
}

// ---- writing ------------------------------------------------------------------------------------
struct Plan {
  std::string header;  // length prefix + padded JSON
  std::vector<std::pair<const std::string*, const Tensor*>> order;
  uint64_t data_bytes = 0;
};

void check_utf8(const std::string& s, const char* what) {
  KILN_CHECK(invalid_utf8(s) == std::string_view::npos, Value, kOp, what, " '", s,
             "' is not valid UTF-8");
}

Plan plan(const TensorMap& tensors, const MetadataMap& metadata) {
  Plan p;
  std::vector<std::pair<int, std::pair<const std::string*, const Tensor*>>> ranked;
  for (const auto& [name, t] : tensors) {
    KILN_CHECK(t.defined(), Value, kOp, "tensor '", name, "' is undefined");
    KILN_CHECK(t.device().type == DeviceType::CPU, Value, kOp, "tensor '", name,
               "' must be on the CPU");
    KILN_CHECK(name != "__metadata__", Value, kOp,
               "'__metadata__' is reserved and cannot name a tensor");
    check_utf8(name, "tensor name");
    ranked.push_back({code_of(t.dtype(), name).rank, {&name, &t}});
  }
  for (const auto& [k, v] : metadata)
    check_utf8(k, "metadata key"), check_utf8(v, "metadata value");
  // Larger dtypes first, then by name in byte order (the safetensors library's layout).
  std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first > b.first : *a.second.first < *b.second.first;
  });

  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) json += ',';
      first = false;
      write_string(json, k);
      json += ':';
      write_string(json, v);
    }
    json += '}';
  }
  for (const auto& [rank, nt] : ranked) {
    const Tensor& t = *nt.second;
    if (json.size() > 1) json += ',';
    write_string(json, *nt.first);
    json += ":{\"dtype\":\"";
    json += code_of(t.dtype(), *nt.first).code;
    json += "\",\"shape\":[";
    for (int64_t i = 0; i < t.dim(); ++i) json += (i ? "," : "") + std::to_string(t.size(i));
    json += "],\"data_offsets\":[" + std::to_string(p.data_bytes) + ",";
    p.data_bytes += t.nbytes();
    json += std::to_string(p.data_bytes) + "]}";
    p.order.push_back(nt);
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');
  uint64_t n = json.size();
  p.header.resize(8);
  for (int i = 0; i < 8; ++i) p.header[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  p.header += json;
  return p;
}

std::string file_where(const std::string& path) { return "file '" + path + "'"; }

[[noreturn]] void io_fail(const std::string& path, const char* what, int err) {
  KILN_FAIL(Runtime, kOp, file_where(path), ": ", what, ": ", std::strerror(err));
}

}  // namespace

std::string safetensors_dtype_code(Dtype d) { return code_of(d, "").code; }

void save_file(const TensorMap& tensors, const std::string& path, const MetadataMap& metadata) {
  Plan p = plan(tensors, metadata);  // validates everything before the file system is touched
  // Write a temporary file beside the target and rename it over the target: tensors loaded from the
  // target (mmap views) keep reading the old inode instead of faulting on a truncated file, and a
  // failed write leaves the old file intact.
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = path + ".kiln-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // umask applies
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) io_fail(path, "cannot open for writing", errno);
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    io_fail(path, "cannot open for writing", err);
  }
  auto fail = [&](int err, bool closed = false) {
    if (!closed) std::fclose(f);
    ::unlink(tmp.c_str());
    io_fail(path, "write failed", err);
  };
  if (std::fwrite(p.header.data(), 1, p.header.size(), f) != p.header.size()) fail(errno);
  for (const auto& [name, t] : p.order) {
    Tensor c;
    try {
      c = t->contiguous();
    } catch (...) {
      std::fclose(f);
      ::unlink(tmp.c_str());
      throw;
    }
    size_t nb = c.nbytes();
    stream_detail::before_host_read();
    if (nb && std::fwrite(c.data_ptr(), 1, nb, f) != nb) fail(errno);
  }
  if (std::fflush(f) != 0) fail(errno);
  if (std::fclose(f) != 0) fail(errno, true);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    io_fail(path, "cannot replace the file", err);
  }
}

std::vector<uint8_t> save(const TensorMap& tensors, const MetadataMap& metadata) {
  Plan p = plan(tensors, metadata);
  std::vector<uint8_t> out(p.header.size() + p.data_bytes);
  std::memcpy(out.data(), p.header.data(), p.header.size());
  size_t pos = p.header.size();
  for (const auto& [name, t] : p.order) {
    Tensor c = t->contiguous();
    stream_detail::before_host_read();
    if (c.nbytes()) std::memcpy(out.data() + pos, c.data_ptr(), c.nbytes());
    pos += c.nbytes();
  }
  return out;
}

SafetensorsContents load_file_with_metadata(const std::string& path) {
  const std::string where = file_where(path);
  auto mapping = std::make_shared<Mapping>();  // before open: nothing below leaks if this throws
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block
  if (fd < 0) io_fail(path, "cannot open", errno);
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    io_fail(path, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    KILN_FAIL(Runtime, kOp, where, ": not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    parse_header(nullptr, size, where);  // raises "too short"
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) io_fail(path, "mmap failed", err);
  mapping->base = base, mapping->len = size;
  return materialise(static_cast<uint8_t*>(base), size, where, &mapping);
}

TensorMap load_file(const std::string& path) { return load_file_with_metadata(path).tensors; }

SafetensorsContents load_with_metadata(const void* data, size_t size) {
  // Nothing is written through this pointer: without a mapping every tensor is copied out.
  return materialise(static_cast<uint8_t*>(const_cast<void*>(data)), size, "bytes", nullptr);
}

TensorMap load(const std::vector<uint8_t>& bytes) {
  return load_with_metadata(bytes.data(), bytes.size()).tensors;
}

}  // namespace kiln
