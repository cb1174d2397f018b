// kiln::runtime: runs an exported program (kiln/export/program.h) with no Python and no compiler, on
// any x86-64 CPU kiln supports (the eager kernels, picked by ISA at load time), autograd off.
//
// A run checks its inputs against the program (dtypes, static sizes, symbol ranges, guards), then
// executes the nodes' kernels in order. Memory is planned once per distinct set of symbol values: a
// shape-only run of the graph on the meta device gives every intermediate's size and which values are
// views of which; intermediates that do not escape get offsets in one arena, shared between values
// whose lifetimes do not overlap (greedy by size). Outputs are fresh tensors the caller owns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/export/program.h"

namespace kiln::runtime {

class Program {
 public:
  explicit Program(std::shared_ptr<const ExportedProgram> ep);
  // load_program + Program: a mapped archive (weights used in place).
  static Program load(const std::string& path);

  // The user inputs in order (the program's USER_INPUTs); the outputs in order (undefined for None).
  // Safe to call from several threads (runs take turns).
  TensorList run(const TensorList& inputs) const;

  const ExportedProgram& exported() const;
  struct Stats {
    int64_t plans = 0;          // distinct input shapes planned
    int64_t arena_bytes = 0;    // the last plan's arena
    int64_t planned_bytes = 0;  // what its values would take without sharing
    int64_t planned_values = 0;
    // the last plan's runs: 1 with the thread pool held as one team (its first run on several
    // threads opened two parallel regions or more), 0 without, -1 not learnt yet
    int team = -1;
  };
  Stats stats() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln::runtime
