// The zip container of export archives (archive.h). Only the "stored" method and the fields the
// writer sets are accepted; see APPNOTE.TXT for the layout.
#include "kiln/export/archive.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "kiln/core/error.h"

namespace kiln::archive {
namespace {
static_assert(std::endian::native == std::endian::little, "the archive layout is little-endian");

constexpr const char* kOp = "export.load";
constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kLocatorSig = 0x07064b50, kAllOnes = 0xffffffff;
constexpr uint16_t kVersion = 20, kVersion64 = 45, kDosDate = 0x21;  // 1980-01-01: archives are reproducible
constexpr uint16_t kPadId = 0x4b4c;                 // "LK": alignment padding (zeros)
constexpr uint16_t kZip64Id = 0x0001, kZip64Local = 20, kZip64Central = 28;  // the extra fields, headers included
constexpr size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kEnd64Size = 56, kLocatorSize = 20;
constexpr size_t kMaxMembers = 1 << 20, kMaxName = 1024;

uint32_t crc32_of(const uint8_t* p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes 32-bit lengths
    const uInt k = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = crc32(c, p, k);
    p += k, n -= k;
  }
  return static_cast<uint32_t>(c);
}

void put16(std::string& s, uint16_t v) { s.append(reinterpret_cast<const char*>(&v), 2); }
void put32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
uint16_t get16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

bool plain_name(const std::string& n) {
  if (n.empty() || n.size() > kMaxName || n.front() == '/' || n.back() == '/') return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '/')) return false;
  size_t start = 0;
  while (start <= n.size()) {  // no empty, "." or ".." component
    const size_t end = std::min(n.find('/', start), n.size());
    const std::string part = n.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}
}  // namespace

// zip64 (APPNOTE 4.5.3): an entry whose size or offset does not fit 32 bits (or every entry, with
// KILN_ARCHIVE_ZIP64=1: the test hook) has 0xffffffff in those fields, version 45, and the values in a
// zip64 extra field (local: sizes; central: sizes and offset); the archive then ends with a zip64 end
// record and its locator before the classic end record, whose counts and offsets are all-ones.
bool force_zip64() {
  const char* e = std::getenv("KILN_ARCHIVE_ZIP64");
  return e && e[0] == '1';
}

void Writer::add(const std::string& name, const void* data, size_t size) {
  KILN_CHECK(plain_name(name), Value, "export.save", "bad member name '", name, "'");
  KILN_CHECK(entries_.size() < kMaxMembers, Value, "export.save", "more than ", kMaxMembers, " members");
  const uint64_t offset = pos();
  const bool z64 = force_zip64() || size >= kAllOnes || offset >= kAllOnes;
  const size_t fixed = kLocalSize + name.size() + (z64 ? kZip64Local : 0);
  const size_t pad = (kAlign - (offset + fixed + 4) % kAlign) % kAlign;  // data aligned after the extras
  const uint32_t crc = crc32_of(static_cast<const uint8_t*>(data), size);
  put32(out_, kLocalSig);
  put16(out_, z64 ? kVersion64 : kVersion);
  put16(out_, 0);  // flags
  put16(out_, 0);  // stored
  put16(out_, 0);  // time
  put16(out_, kDosDate);
  put32(out_, crc);
  put32(out_, z64 ? kAllOnes : static_cast<uint32_t>(size));
  put32(out_, z64 ? kAllOnes : static_cast<uint32_t>(size));
  put16(out_, static_cast<uint16_t>(name.size()));
  put16(out_, static_cast<uint16_t>((z64 ? kZip64Local : 0) + 4 + pad));
  out_ += name;
  if (z64) {
    put16(out_, kZip64Id);
    put16(out_, 16);
    put64(out_, size);
    put64(out_, size);
  }
  put16(out_, kPadId);
  put16(out_, static_cast<uint16_t>(pad));
  out_.append(pad, '\0');
  if (sink_) {  // the header, then the data straight from the tensor: no copy of the weights in memory
    flush();
    sink_->write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    flushed_ += size;
  } else {
    out_.append(static_cast<const char*>(data), size);
  }
  entries_.push_back({name, crc, size, offset, z64});
}

std::string Writer::finish() {
  const uint64_t cd = pos();
  bool any64 = force_zip64() || entries_.size() >= 0xffff;
  for (const Entry& e : entries_) {
    any64 = any64 || e.zip64;
    put32(out_, kCentralSig);
    put16(out_, e.zip64 ? kVersion64 : kVersion);  // made by
    put16(out_, e.zip64 ? kVersion64 : kVersion);  // needed
    put16(out_, 0);
    put16(out_, 0);
    put16(out_, 0);
    put16(out_, kDosDate);
    put32(out_, e.crc);
    put32(out_, e.zip64 ? kAllOnes : static_cast<uint32_t>(e.size));
    put32(out_, e.zip64 ? kAllOnes : static_cast<uint32_t>(e.size));
    put16(out_, static_cast<uint16_t>(e.name.size()));
    put16(out_, e.zip64 ? kZip64Central : 0);  // extra
    put16(out_, 0);  // comment
    put16(out_, 0);  // disk
    put16(out_, 0);  // internal attributes
    put32(out_, 0);  // external attributes
    put32(out_, e.zip64 ? kAllOnes : static_cast<uint32_t>(e.offset));
    out_ += e.name;
    if (e.zip64) {
      put16(out_, kZip64Id);
      put16(out_, 24);
      put64(out_, e.size);
      put64(out_, e.size);
      put64(out_, e.offset);
    }
  }
  const uint64_t cd_size = pos() - cd;
  any64 = any64 || cd >= kAllOnes || cd_size >= kAllOnes;
  if (any64) {
    const uint64_t end64 = pos();
    put32(out_, kEnd64Sig);
    put64(out_, kEnd64Size - 12);  // the record's size after this field
    put16(out_, kVersion64);
    put16(out_, kVersion64);
    put32(out_, 0);
    put32(out_, 0);
    put64(out_, entries_.size());
    put64(out_, entries_.size());
    put64(out_, cd_size);
    put64(out_, cd);
    put32(out_, kLocatorSig);
    put32(out_, 0);
    put64(out_, end64);
    put32(out_, 1);
  }
  put32(out_, kEndSig);
  put16(out_, 0);
  put16(out_, 0);
  put16(out_, any64 ? 0xffff : static_cast<uint16_t>(entries_.size()));
  put16(out_, any64 ? 0xffff : static_cast<uint16_t>(entries_.size()));
  put32(out_, any64 ? kAllOnes : static_cast<uint32_t>(cd_size));
  put32(out_, any64 ? kAllOnes : static_cast<uint32_t>(cd));
  put16(out_, 0);
  if (sink_) flush();
  return std::move(out_);
}

void Writer::flush() {
  sink_->write(out_.data(), static_cast<std::streamsize>(out_.size()));
  flushed_ += out_.size();
  out_.clear();
}

std::shared_ptr<Blob> Blob::map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, Runtime, kOp, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    KILN_FAIL(Runtime, kOp, "'", path, "' is not a regular file");
  }
  std::shared_ptr<Blob> b(new Blob);
  b->size_ = static_cast<size_t>(st.st_size);
  if (b->size_ > 0) {
    void* p = ::mmap(nullptr, b->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      KILN_FAIL(Runtime, kOp, "cannot map '", path, "': ", std::strerror(errno));
    }
    b->data_ = static_cast<uint8_t*>(p);
    b->mapped_ = true;
  }
  ::close(fd);
  return b;
}

std::shared_ptr<Blob> Blob::copy(std::string_view bytes) {
  std::shared_ptr<Blob> b(new Blob);
  b->size_ = bytes.size();
  b->data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, (bytes.size() + kAlign - 1) / kAlign * kAlign + kAlign));
  KILN_CHECK(b->data_, OutOfMemory, kOp, "cannot allocate ", bytes.size(), " bytes");
  std::memcpy(b->data_, bytes.data(), bytes.size());
  return b;
}

Blob::~Blob() {
  if (mapped_)
    ::munmap(data_, size_);
  else
    std::free(data_);
}

std::vector<Member> read(const Blob& blob, const std::string& what) {
  const uint8_t* base = blob.data();
  const size_t size = blob.size();
  auto bad = [&](const std::string& where, const std::string& why) {
    KILN_FAIL(Runtime, kOp, "'", what, "' is not a valid kiln archive (", where, ": ", why,
              "); it is truncated, corrupted or not written by kiln.export.save");
  };
  if (size < kEndSize) bad("end record", "the file has " + std::to_string(size) + " bytes");
  const uint8_t* end = base + size - kEndSize;
  if (get32(end) != kEndSig || get16(end + 20) != 0) bad("end record", "missing or has a comment");
  if (get16(end + 4) != 0 || get16(end + 6) != 0 || get16(end + 8) != get16(end + 10))
    bad("end record", "multi-disk fields");
  uint64_t count = get16(end + 10), cd_size = get32(end + 12), cd = get32(end + 16);
  size_t cd_end = size - kEndSize;  // where the central directory must end
  const bool any64 = count == 0xffff && cd_size == kAllOnes && cd == kAllOnes;
  if (any64) {  // the zip64 end record and its locator, right before the end record
    if (size < kEndSize + kLocatorSize + kEnd64Size) bad("zip64 end record", "out of bounds");
    const uint8_t* loc = end - kLocatorSize;
    const uint8_t* e64 = loc - kEnd64Size;
    if (get32(loc) != kLocatorSig || get32(loc + 4) != 0 || get32(loc + 16) != 1 ||
        get64(loc + 8) != static_cast<uint64_t>(e64 - base))
      bad("zip64 locator", "fields");
    if (get32(e64) != kEnd64Sig || get64(e64 + 4) != kEnd64Size - 12 || get16(e64 + 12) != kVersion64 ||
        get16(e64 + 14) != kVersion64 || get32(e64 + 16) != 0 || get32(e64 + 20) != 0 || get64(e64 + 24) != get64(e64 + 32))
      bad("zip64 end record", "fields");
    count = get64(e64 + 32), cd_size = get64(e64 + 40), cd = get64(e64 + 48);
    cd_end = static_cast<size_t>(e64 - base);
  } else if (count == 0xffff || cd_size == kAllOnes || cd == kAllOnes) {
    bad("end record", "zip64 markers without the zip64 end record");
  }
  if (count > kMaxMembers) bad("end record", std::to_string(count) + " members");
  if (cd > cd_end || cd_size != cd_end - cd) bad("end record", "central directory bounds");
  std::vector<Member> out;
  std::set<std::string> names;
  size_t pos = cd, next_local = 0;
  bool saw64 = false;
  for (size_t k = 0; k < count; ++k) {
    const std::string where = "member " + std::to_string(k);
    if (cd_end - pos < kCentralSize) bad(where, "central header out of bounds");
    const uint8_t* h = base + pos;
    const uint16_t version = get16(h + 4);
    const bool z64 = version == kVersion64;
    if (get32(h) != kCentralSig || (version != kVersion && !z64) || get16(h + 6) != version || get16(h + 8) != 0 ||
        get16(h + 10) != 0 || get16(h + 12) != 0 || get16(h + 14) != kDosDate ||
        get16(h + 30) != (z64 ? kZip64Central : 0) || get16(h + 32) != 0 || get16(h + 34) != 0 ||
        get16(h + 36) != 0 || get32(h + 38) != 0)
      bad(where, "central header fields");
    const uint32_t crc = get32(h + 16);
    uint64_t csize = get32(h + 20), usize = get32(h + 24), offset = get32(h + 42);
    const size_t name_len = get16(h + 28), cextra = get16(h + 30);
    if (cd_end - pos - kCentralSize < name_len + cextra) bad(where, "name out of bounds");
    std::string name(reinterpret_cast<const char*>(h + kCentralSize), name_len);
    if (!plain_name(name)) bad(where, "name is not a plain relative path");
    if (!names.insert(name).second) bad(name, "duplicate member");
    if (z64) {
      const uint8_t* x = h + kCentralSize + name_len;
      if (csize != kAllOnes || usize != kAllOnes || offset != kAllOnes || get16(x) != kZip64Id || get16(x + 2) != 24)
        bad(name, "zip64 central fields");
      usize = get64(x + 4), csize = get64(x + 12), offset = get64(x + 20);
      saw64 = true;
    }
    if (csize != usize) bad(name, "compressed size");
    pos += kCentralSize + name_len + cextra;
    // its local header: right after the previous member, the same fields
    if (offset != next_local) bad(name, "members are not contiguous");
    const size_t lz = z64 ? kZip64Local : 0;
    if (cd - offset < kLocalSize + name_len + lz + 4) bad(name, "local header out of bounds");
    const uint8_t* l = base + offset;
    const size_t extra = get16(l + 28);
    if (get32(l) != kLocalSig || get16(l + 4) != version || get16(l + 6) != 0 || get16(l + 8) != 0 ||
        get16(l + 10) != 0 || get16(l + 12) != kDosDate || get32(l + 14) != crc ||
        get32(l + 18) != (z64 ? kAllOnes : csize) || get32(l + 22) != (z64 ? kAllOnes : usize) ||
        get16(l + 26) != name_len || extra < lz + 4)
      bad(name, "local header fields");
    if (std::memcmp(l + kLocalSize, name.data(), name_len) != 0) bad(name, "local and central names differ");
    const uint8_t* x = l + kLocalSize + name_len;
    if (cd - offset - kLocalSize - name_len < extra) bad(name, "extra field out of bounds");
    if (z64) {
      if (get16(x) != kZip64Id || get16(x + 2) != 16 || get64(x + 4) != usize || get64(x + 12) != csize)
        bad(name, "zip64 local fields");
      x += lz;
    }
    if (get16(x) != kPadId || get16(x + 2) != extra - lz - 4) bad(name, "padding field");
    for (size_t i = 4; i < extra - lz; ++i)
      if (x[i] != 0) bad(name, "padding bytes");
    const size_t data = offset + kLocalSize + name_len + extra;
    if (data % kAlign != 0) bad(name, "data not 64-byte aligned");
    if (cd - data < usize) bad(name, "data out of bounds");
    if (crc32_of(base + data, usize) != crc) bad(name, "CRC-32 mismatch");
    next_local = data + usize;
    out.push_back({std::move(name), const_cast<uint8_t*>(base + data), usize});
  }
  if (saw64 && !any64) bad("end record", "zip64 members without the zip64 end record");
  if (next_local != cd || pos != cd_end) bad("central directory", "bytes outside every member");
  return out;
}

}  // namespace kiln::archive
