// What the runtime (process_group.cpp) and the collectives (collectives.cpp) share.
#pragma once

namespace kiln::distributed::detail {

// Raises RuntimeError naming the op and the MPI call when rc is not MPI_SUCCESS.
void mpi_check(int rc, const char* op, const char* call);

}  // namespace kiln::distributed::detail
