// An op's signature in torch's schema language, e.g.
//   add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
// It names the op's arguments in the order a dispatch() call passes them: the tensor arguments
// (Tensor, Tensor?, Tensor[]) are the call's inputs, every other argument is one attribute, each
// in schema order. Types and the Attr alternative each takes:
//   int, SymInt -> int64_t    float -> double       bool -> bool        Scalar -> Scalar
//   int[], SymInt[] -> Shape  float[] -> std::vector<double>            str -> std::string
//   ScalarType -> Dtype       Device -> Device      T? -> T or std::monostate (None)
//   Generator -> int64_t: the Generator's address, for composites only (table ops take the state a
//                front end reserved from it as ints, so a recorded call replays without it)
// A Tensor[] argument takes the rest of the inputs (there may be only one, and it comes last among
// the tensor arguments); an undefined tensor stands for None in a Tensor? input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dispatch/op.h"

namespace kiln {

// What an argument holds, with the Attr alternative it takes (Tensor kinds are inputs instead).
enum class ArgKind : uint8_t {
  Tensor, TensorList, Int, Float, Bool, Scalar, IntList, FloatList, Str, ScalarType, Device, Generator, Other
};

struct SchemaArg {
  std::string name;
  std::string type;                    // as written, e.g. "Tensor?", "int[]", "Tensor?[]"
  std::optional<std::string> default_;  // as written, e.g. "1", "None", "[]", "\"none\""
  bool kwarg_only = false;
  ArgKind kind = ArgKind::Other;
  bool optional = false;  // T? (for a Tensor?[] list: its elements may be None)
  int list_size = 0;      // N of a sized list, int[N] (torch's parser then takes a lone int too); else 0

  bool is_tensor() const { return kind == ArgKind::Tensor || kind == ArgKind::TensorList; }
  bool is_tensor_list() const { return kind == ArgKind::TensorList; }
};

struct Schema {
  std::string name;      // e.g. "add"
  std::string overload;  // e.g. "Tensor"; empty for the default overload
  std::vector<SchemaArg> args;
  std::vector<std::string> returns;  // return types, e.g. {"Tensor", "Tensor"}
  std::vector<std::string> return_names;  // their names where the schema gives them ("values", ...), else ""
  // how many inputs and attributes a call passes: [min, max] (trailing Tensor? inputs and
  // defaulted attributes may be left out; a Tensor[] takes any number of inputs)
  size_t min_inputs = 0, max_inputs = 0, min_attrs = 0, max_attrs = 0;
  bool has_list = false;

  // The op's stable name for serialisation: "add.Tensor", or "add".
  std::string qualified_name() const { return overload.empty() ? name : name + "." + overload; }
  std::string str() const;  // the schema text, normalised
};

// Parses a schema; raises a ValueError-kind kiln::Error naming the text and the position at fault.
Schema parse_schema(std::string_view text);

// Why a call's inputs and attributes do not fit the schema ("" when they do): the counts, or the
// first argument whose value has another type.
std::string schema_mismatch(const Schema& schema, const TensorList& inputs, const Attrs& attrs);
// The schema type an attribute value holds: "int", "float[]", "None", ...
const char* attr_type_name(const Attr& a);
// An attribute as Python would write it: 2, 0.5, True, None, [2, 3], kiln.float32, "mean"; an integer
// that is a size of the active ShapeEnv prints as its expression ("2*seq").
std::string attr_str(const Attr& a);

}  // namespace kiln
