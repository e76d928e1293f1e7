"""The cross-cluster world of a HyperJob, as the annotation each child Volcano Job carries.

A HyperJob whose own ``plugins`` include ``mpi`` or ``tensorflow`` gives all its children one
world: one hostfile, one ``TF_CONFIG`` cluster spec. The splitter writes that world on every child
(annotation ``hyperjob.io/world``, compact JSON) and the job-controller's jobcore computes each
pod's env and files from it: the data is O(children × tasks), never O(pods²), and it travels with
the child's manifest, so no message needs a field of its own.

Shape: ``{"hyperjob": name, "plugins": {plugin: [args]}, "children": [{"name": child, "tasks":
{task: replicas}}]}`` — every child of the HyperJob in plan order (replicated jobs in spec order,
then index), each child's tasks in template order. A pod ``<child>-<task>-<i>`` is reachable as
``<child>-<task>-<i>.<child>`` (the svc plugin's hostname; HyperJob-level plugins reject templates
that set their own ``hostname`` or ``subdomain``).
"""

from __future__ import annotations

import msgspec

from .errors import ManifestError

WORLD_ANNOTATION = "hyperjob.io/world"


class WorldChild(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    tasks: dict[str, int]


class World(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every child of one HyperJob and the HyperJob-level plugins that span them."""

    hyperjob: str
    plugins: dict[str, list[str]]
    children: list[WorldChild]

    def position(self, child: str) -> int:
        """The child's index in the world; ``KeyError`` for a child that is not part of it."""
        for i, member in enumerate(self.children):
            if member.name == child:
                return i
        raise KeyError(child)

    def hosts(self, task: str) -> list[str]:
        """``<child>-<task>-<i>.<child>`` of every replica of ``task`` in every child, in world order."""
        return [f"{c.name}-{task}-{i}.{c.name}" for c in self.children for i in range(c.tasks.get(task, 0))]

    def task_offset(self, child: str, task: str) -> int:
        """Replicas of ``task`` in the children before ``child``: its pod ``i`` is the world's
        replica ``offset + i``."""
        return sum(c.tasks.get(task, 0) for c in self.children[: self.position(child)])

    def task_names(self) -> list[str]:
        """Every task of the world, in order of first appearance."""
        return list(dict.fromkeys(task for c in self.children for task in c.tasks))

    def replicas(self) -> int:
        return sum(n for c in self.children for n in c.tasks.values())


def encode_world(world: World) -> str:
    return msgspec.json.encode(world).decode()


def decode_world(text: str, path: str = f"$.metadata.annotations.{WORLD_ANNOTATION}") -> World:
    try:
        return msgspec.json.decode(text, type=World)
    except msgspec.DecodeError as exc:
        raise ManifestError(path, f"not a HyperJob world: {exc}") from None
