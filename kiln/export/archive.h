// The export archive's container: a zip of stored (uncompressed) members, each member's data 64-byte
// aligned in the file (padding in the local header's extra field) so that a mapped archive's weights
// can be used in place, and each checked by the zip CRC-32. Python's zipfile reads it.
//
// The reader accepts exactly what the writer makes: every header field is checked, members must be
// contiguous and cover the file, names are plain relative paths; anything else raises RuntimeError
// naming the member and the field, so a flipped byte or a truncation never loads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::archive {

inline constexpr size_t kAlign = 64;

class Writer {
 public:
  Writer() = default;
  explicit Writer(std::ostream* sink) : sink_(sink) {}  // writes as it goes (finish() returns "")
  void add(const std::string& name, const void* data, size_t size);
  void add(const std::string& name, std::string_view data) { add(name, data.data(), data.size()); }
  std::string finish();  // the archive's bytes (in memory), or the rest written to the sink

 private:
  uint64_t pos() const { return flushed_ + out_.size(); }
  void flush();
  std::ostream* sink_ = nullptr;
  uint64_t flushed_ = 0;
  struct Entry {
    std::string name;
    uint32_t crc;
    uint64_t size, offset;
    bool zip64;
  };
  std::string out_;
  std::vector<Entry> entries_;
};

// The archive's bytes: a private mapping of a file (copy-on-write: a write never reaches the file) or
// an aligned copy of memory. Members point into it.
class Blob {
 public:
  static std::shared_ptr<Blob> map_file(const std::string& path);
  static std::shared_ptr<Blob> copy(std::string_view bytes);
  ~Blob();
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  Blob() = default;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
};

struct Member {
  std::string name;
  uint8_t* data;
  size_t size;
};
// Every member, validated (structure and CRC-32); `what` names the archive in errors.
std::vector<Member> read(const Blob& blob, const std::string& what);

}  // namespace kiln::archive
