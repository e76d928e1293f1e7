"""A data-parallel "training" job in pure Python: rendezvous at MASTER_ADDR:MASTER_PORT, then ring
all-reduce of gradients over TCP, the way DDP's backends do it, with no torch needed.

Each rank (RANK of WORLD_SIZE, from the env the HyperJob's ``pytorch`` plugin injects) fits
``y = 3x`` on its own shard of the data; after every step the gradients are summed across all ranks
with a ring all-reduce (reduce-scatter, then all-gather), so every rank ends with the same weight
only if all ranks — in every cluster — took part in one job. Exits 0 when the weight converged and
the all-reduce checks out, 1 otherwise, and fails (instead of hanging) after ``TIMEOUT`` seconds.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time

TIMEOUT = float(os.environ.get("RING_TIMEOUT", "90"))
STEPS = int(os.environ.get("RING_STEPS", "40"))
DEADLINE = time.monotonic() + TIMEOUT


def send(sock: socket.socket, value: object) -> None:
    data = json.dumps(value).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def recv(sock: socket.socket) -> object:
    (size,) = struct.unpack("!I", _exactly(sock, 4))
    return json.loads(_exactly(sock, size))


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("peer closed the connection")
        data += chunk
    return data


def connect(host: str, port: int) -> socket.socket:
    """Connect, retrying while the peer is not listening yet (it may start later)."""
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=5)
            sock.settimeout(max(1.0, DEADLINE - time.monotonic()))
            return sock
        except OSError:
            if time.monotonic() > DEADLINE:
                raise
            time.sleep(0.2)


def rendezvous(rank: int, world: int, master: tuple[str, int], my_port: int) -> list[list[object]]:
    """Every rank's (host, port) for the ring: rank 0 collects them at the master address."""
    if rank != 0:
        with connect(*master) as sock:
            send(sock, {"rank": rank, "port": my_port})
            return recv(sock)  # type: ignore[return-value]
    server = socket.create_server(("", master[1]), reuse_port=False)
    server.settimeout(max(1.0, DEADLINE - time.monotonic()))
    peers: dict[int, list[object]] = {0: [master[0], my_port]}
    conns = []
    while len(peers) < world:
        conn, (host, _) = server.accept()
        hello = recv(conn)
        peers[int(hello["rank"])] = [host, int(hello["port"])]  # type: ignore[index]
        conns.append(conn)
    table = [peers[r] for r in range(world)]
    for conn in conns:
        send(conn, table)
        conn.close()
    server.close()
    return table


def ring_allreduce(values: list[float], rank: int, world: int, nxt: socket.socket, prv: socket.socket) -> list[float]:
    """Sum ``values`` (one chunk per rank) across the ring: reduce-scatter, then all-gather."""
    out = list(values)
    for step in range(world - 1):
        send(nxt, [(rank - step) % world, out[(rank - step) % world]])
        index, value = recv(prv)  # type: ignore[misc]
        out[index] += value
    for step in range(world - 1):
        send(nxt, [(rank + 1 - step) % world, out[(rank + 1 - step) % world]])
        index, value = recv(prv)  # type: ignore[misc]
        out[index] = value
    return out


def main() -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    master = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    cluster = os.environ.get("HYPERJOB_CLUSTER", "?")
    listener = socket.create_server(("", 0))
    listener.settimeout(max(1.0, DEADLINE - time.monotonic()))
    table = rendezvous(rank, world, master, listener.getsockname()[1])
    host, port = table[(rank + 1) % world]
    nxt = connect(str(host), int(port))  # type: ignore[arg-type]
    prv, _ = listener.accept()
    prv.settimeout(max(1.0, DEADLINE - time.monotonic()))
    # The all-reduce itself: rank r contributes r+1 in every chunk.
    summed = ring_allreduce([float(rank + 1)] * world, rank, world, nxt, prv)
    expected = world * (world + 1) / 2
    # "Training": y = 3x by gradient descent; each rank has its own x values, and every step uses
    # the mean gradient over all ranks, so every rank follows the same path to w = 3.
    xs = [0.1 * (i + 1) + 0.01 * rank for i in range(10)]
    w = 0.0
    for _ in range(STEPS):
        grad = sum(2 * (w * x - 3 * x) * x for x in xs) / len(xs)
        w -= 1.0 * ring_allreduce([grad] + [0.0] * (world - 1), rank, world, nxt, prv)[0] / world
    ok = all(v == expected for v in summed) and abs(w - 3.0) < 1e-3
    print(f"rank {rank}/{world} cluster {cluster}: allreduce {summed[0]:g} (expected {expected:g}), "
          f"w={w!r} {'OK' if ok else 'MISMATCH'}", flush=True)
    nxt.close()
    prv.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
