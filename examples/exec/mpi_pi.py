"""π by the midpoint rule over MPI: each rank sums its share of the intervals, rank 0 reduces them.

Run by ``mpi_launcher.py`` (``mpirun``) on the ranks that the workers' MPI proxies start; each rank
says which pod and cluster it runs in (its proxy's environment: the launcher passes none), so the
launcher's log shows one MPI world spread over both clusters.
"""

from __future__ import annotations

import math
import os
import sys

from mpi4py import MPI

INTERVALS = 2_000_000


def main() -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    width = 1.0 / INTERVALS
    share = width * sum(4.0 / (1.0 + ((i + 0.5) * width) ** 2) for i in range(rank, INTERVALS, size))
    where = f"{os.environ.get('HYPERJOB_POD', '?')} cluster {os.environ.get('HYPERJOB_CLUSTER', '?')}"
    print(f"rank {rank}/{size} on {where}: partial {share:.12f}", flush=True)
    pi = comm.reduce(share, op=MPI.SUM, root=0)
    if rank == 0:
        error = abs(pi - math.pi)
        print(f"pi = {pi:.12f} (error {error:.1e}) from {size} ranks", flush=True)
        return 0 if error < 1e-9 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
