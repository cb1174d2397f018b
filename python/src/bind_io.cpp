// Python binding: io (safetensors). The public names live in python/kiln/io.py; these are its
// private entry points (underscored, so `from ._C import *` skips them).
#include <cstring>
#include <string>

#include "common.h"
#include "kiln/core/stream.h"
#include "kiln/io/safetensors.h"

namespace kiln::py {
namespace {

[[noreturn]] void type_error(const std::string& msg) { throw nb::type_error(msg.c_str()); }

TensorMap tensor_map(nb::handle h) {
  if (!nb::isinstance<nb::dict>(h))
    type_error("[safetensors] expected a dict of str to Tensor, got " +
               nb::cast<std::string>(nb::str(h.type().attr("__name__"))));
  TensorMap out;
  for (auto [k, v] : nb::borrow<nb::dict>(h)) {
    if (!nb::isinstance<nb::str>(k))
      type_error("[safetensors] tensor names must be str, got " +
                 nb::cast<std::string>(nb::str(k.type().attr("__name__"))));
    auto name = nb::cast<std::string>(k);
    if (!nb::isinstance<Tensor>(v))
      type_error("[safetensors] value for '" + name + "' must be a Tensor, got " +
                 nb::cast<std::string>(nb::str(v.type().attr("__name__"))));
    out.emplace(std::move(name), nb::cast<Tensor>(v));
  }
  return out;
}

MetadataMap metadata_map(nb::handle h) {
  MetadataMap out;
  if (h.is_none()) return out;
  if (!nb::isinstance<nb::dict>(h))
    type_error("[safetensors] metadata must be a dict of str to str");
  for (auto [k, v] : nb::borrow<nb::dict>(h)) {
    if (!nb::isinstance<nb::str>(k) || !nb::isinstance<nb::str>(v))
      type_error("[safetensors] metadata must be a dict of str to str");
    out.emplace(nb::cast<std::string>(k), nb::cast<std::string>(v));
  }
  return out;
}

nb::tuple contents_tuple(SafetensorsContents&& c) {
  nb::dict tensors, metadata;
  for (auto& [name, t] : c.tensors)
    tensors[nb::str(name.data(), name.size())] = nb::cast(std::move(t));
  for (auto& [k, v] : c.metadata)
    metadata[nb::str(k.data(), k.size())] = nb::str(v.data(), v.size());
  return nb::make_tuple(tensors, metadata);
}

}  // namespace

void bind_io(nb::module_& m) {
  // kiln.save / kiln.load (python/kiln/serialization.py): a tensor's whole storage as a 1-D tensor of
  // its dtype (and the tensor's offset in it), a contiguous tensor's bytes, and a tensor made from bytes.
  m.def("_storage_view", [](const Tensor& t) {
    int64_t n = static_cast<int64_t>(t.storage()->nbytes() / t.itemsize());
    return nb::make_tuple(as_strided(detach(t), {n}, {1}, 0), t.storage_offset());
  });
  m.def("_storage_bytes", [](const Tensor& t) {
    KILN_CHECK(t.is_contiguous(), Value, "save", "expected a contiguous tensor");
    stream_detail::before_host_read();
    return nb::bytes(static_cast<const char*>(t.data_ptr()), t.nbytes());
  });
  m.def("_tensor_from_storage_bytes", [](nb::bytes b, nb::handle dtype) {
    Dtype d = as_dtype(dtype);
    size_t item = itemsize(d);
    KILN_CHECK(b.size() % item == 0, Runtime, "load", "a storage record of ", b.size(),
               " bytes does not hold whole ", dtype_name(d), " elements");
    Tensor t = empty({static_cast<int64_t>(b.size() / item)}, d);
    if (b.size()) std::memcpy(t.data_ptr(), b.c_str(), b.size());
    return t;
  });
  m.def(
      "_safetensors_save_file",
      [](nb::handle tensors, const std::string& path, nb::handle metadata) {
        kiln::save_file(tensor_map(tensors), path, metadata_map(metadata));
      },
      "tensors"_a, "path"_a, "metadata"_a.none() = nb::none());
  m.def(
      "_safetensors_save",
      [](nb::handle tensors, nb::handle metadata) {
        std::vector<uint8_t> out = kiln::save(tensor_map(tensors), metadata_map(metadata));
        return nb::bytes(out.data(), out.size());
      },
      "tensors"_a, "metadata"_a.none() = nb::none());
  // Both loaders return (dict of tensors, dict of metadata); parsing runs without the GIL.
  m.def("_safetensors_load_file", [](const std::string& path) {
    SafetensorsContents c;
    {
      nb::gil_scoped_release release;
      c = kiln::load_file_with_metadata(path);
    }
    return contents_tuple(std::move(c));
  });
  m.def("_safetensors_load", [](nb::bytes data) {
    SafetensorsContents c;
    {
      nb::gil_scoped_release release;  // `data` is immutable and kept alive by the caller
      c = kiln::load_with_metadata(data.data(), data.size());
    }
    return contents_tuple(std::move(c));
  });
}

}  // namespace kiln::py
