"""Job plugins as pure functions of (job record, pod) → what the pod sees.

Volcano's plugins mutate the pod (env vars, a ConfigMap or Secret mounted as files, container
ports, the ray plugin's command). Here each plugin returns a ``PodPatch``: ``env`` (ConfigMap
references resolved), ``files`` (absolute path → content), ``command`` and ``ports``. The job's
plugins apply in name order (Go's map order is random; no two Volcano plugins set the same
variable), then the HyperJob-level world plugins of a child (``jobcore.world``), then the record's
``extra_env``, then the caller's. ``env``, ``svc`` and ``ssh`` are here; the distributed-framework
plugins are in ``jobcore.frameworks``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from hyperjob import api

from .frameworks import Flags, mpi_plugin, pytorch_plugin, ray_plugin, tensorflow_plugin
from .model import JobRecord
from .naming import PodPatch, parse_pod_name, pod_name, svc_entries, svc_patch, task_hosts
from .world import world_patch

Env = dict[str, str]
Files = dict[str, str]


def pod_patch(record: JobRecord, name: str, extra_env: Mapping[str, str] | None = None) -> PodPatch:
    """Everything the job's plugins give pod ``name``; ``extra_env`` (then the record's) wins.

    Pure and deterministic. Raises ``KeyError`` for a name that is not ``<job>-<task>-<index>`` of
    this job.
    """
    task, index = parse_pod_name(record, name)
    patch = PodPatch()
    for plugin in sorted(record.spec.plugins):
        fn = _PLUGINS.get(plugin)
        if fn is not None:
            flags = api.plugin_flags(plugin, record.spec.plugins[plugin], f"$.spec.plugins.{plugin}")
            patch.merge(fn(record, task, index, flags))
    patch.merge(world_patch(record, task, index))
    patch.env.update(record.extra_env)
    patch.env.update(extra_env or {})
    return patch


def pod_environment(record: JobRecord, name: str, extra_env: Mapping[str, str] | None = None) -> tuple[Env, Files]:
    """The env and files of ``pod_patch`` (what a node needs beyond the pod record's command)."""
    patch = pod_patch(record, name, extra_env)
    return patch.env, patch.files


# ---------------------------------------------------------------------------------------- plugins
def env_plugin(record: JobRecord, task: api.TaskSpec, index: int, flags: Flags) -> PodPatch:
    return PodPatch(env={"VK_TASK_INDEX": str(index), "VC_TASK_INDEX": str(index)})


def svc_data(record: JobRecord) -> dict[str, str]:
    """The ``<job>-svc`` ConfigMap: ``<task>.host`` (newline-joined), ``VC_<TASK>_HOSTS``, ``VC_<TASK>_NUM``."""
    return svc_entries({task.name: task_hosts(record, task) for task in record.spec.tasks})


def svc_plugin(record: JobRecord, task: api.TaskSpec, index: int, flags: Flags) -> PodPatch:
    return svc_patch(svc_data(record), flags["inject-hosts-env"] == "true")


def ssh_config(record: JobRecord, port: int = 22) -> str:
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in record.spec.tasks:
        spec = task.template.spec
        names = (
            [spec.hostname] if spec.hostname else [pod_name(record.name, task.name, i) for i in range(task.replicas)]
        )
        for host in names:
            lines += [f"Host {host}", f"  HostName {host}.{spec.subdomain or record.name}", f"  Port {port}"]
    return "\n".join(lines) + "\n"


def ssh_plugin(record: JobRecord, task: api.TaskSpec, index: int, flags: Flags) -> PodPatch:
    """The key pair (``--ssh-private-key``/``--ssh-public-key`` when given, else the one admission
    made) and an ssh config naming every pod, under ``--ssh-key-file-path``."""
    private = flags["ssh-private-key"] or (record.ssh.private_key if record.ssh else "")
    public = flags["ssh-public-key"] or (record.ssh.public_key if record.ssh else "")
    if not private:
        return PodPatch()
    path = flags["ssh-key-file-path"]
    return PodPatch(
        files={
            f"{path}/id_rsa": private,
            f"{path}/id_rsa.pub": public,
            f"{path}/authorized_keys": public,
            f"{path}/config": ssh_config(record, int(flags["ssh-port"])),
        }
    )


PluginFn = Callable[[JobRecord, api.TaskSpec, int, Flags], PodPatch]
_PLUGINS: dict[str, PluginFn] = {
    "env": env_plugin,
    "svc": svc_plugin,
    "ssh": ssh_plugin,
    "pytorch": pytorch_plugin,
    "mpi": mpi_plugin,
    "tensorflow": tensorflow_plugin,
    "ray": ray_plugin,
}
