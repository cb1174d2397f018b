// libFuzzer target (issues 12 and 14): the export archive loader (zip container, CRC-32s, graph JSON,
// weights) on arbitrary bytes. It must raise kiln::Error or load; anything else — a signal, an
// ASan/UBSan report, another exception escaping — is a finding.
#include <string>

#include "kiln/export/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)kiln::load_program_bytes(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const kiln::Error&) {
  }
  return 0;
}
