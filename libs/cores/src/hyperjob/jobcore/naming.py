"""Pod names, hostnames and what a job plugin gives a pod (``PodPatch``).

Hostnames are ``<job>-<task>-<i>`` unless the task template sets ``hostname``; the subdomain is the
job name unless the template sets one (Volcano's ``helpers.MakeDomainName``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hyperjob import api

from .model import JobRecord

SVC_MOUNT = "/etc/volcano"


@dataclass
class PodPatch:
    """What the job plugins give one pod: ``env`` (name → value, ConfigMap references resolved),
    ``files`` (absolute path → content), ``command`` (replaces the main container's, ray plugin)
    and ``ports`` (container port name → number, added where the container lacks that number)."""

    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    command: list[str] | None = None
    ports: dict[str, int] = field(default_factory=dict)

    def merge(self, other: PodPatch) -> None:
        """Apply ``other`` on top of this patch (later plugins win, as later env entries do in a pod)."""
        self.env.update(other.env)
        self.files.update(other.files)
        if other.command is not None:
            self.command = other.command
        for name, port in other.ports.items():
            if port not in self.ports.values():
                self.ports[name] = port


def pod_name(job: str, task: str, index: int) -> str:
    return f"{job}-{task}-{index}"


def parse_pod_name(record: JobRecord, name: str) -> tuple[api.TaskSpec, int]:
    """The task and index of ``<job>-<task>-<index>``; task names may contain ``-``."""
    for task in record.spec.tasks:
        prefix = f"{record.name}-{task.name}-"
        rest = name[len(prefix) :]
        if name.startswith(prefix) and rest.isdigit() and int(rest) < task.replicas:
            return task, int(rest)
    raise KeyError(f"{name!r} is not a pod of job {record.name!r}")


def domain_name(record: JobRecord, task: api.TaskSpec, index: int) -> str:
    """``<hostname>.<subdomain>`` of one replica (Volcano's ``MakeDomainName``): a template hostname
    names every replica alike."""
    spec = task.template.spec
    return f"{spec.hostname or pod_name(record.name, task.name, index)}.{spec.subdomain or record.name}"


def task_hosts(record: JobRecord, task: api.TaskSpec) -> list[str]:
    """``<host>.<subdomain>`` of every replica, or only the template's hostname when it sets one."""
    if task.template.spec.hostname:
        return [domain_name(record, task, 0)]
    return [domain_name(record, task, i) for i in range(task.replicas)]


def find_task(record: JobRecord, name: str) -> api.TaskSpec | None:
    return next((t for t in record.spec.tasks if t.name == name), None)


def env_key(task_name: str) -> str:
    """Volcano's env spelling of a task name: ``-`` → ``_``, then upper case."""
    return task_name.replace("-", "_").upper()


def svc_entries(hosts_by_task: Mapping[str, list[str]]) -> dict[str, str]:
    data: dict[str, str] = {}
    for task, hosts in hosts_by_task.items():
        data[f"{task.replace('-', '_')}.host"] = "\n".join(hosts)
        data[f"VC_{env_key(task)}_HOSTS"] = ",".join(hosts)
        data[f"VC_{env_key(task)}_NUM"] = str(len(hosts))
    return data


def svc_patch(data: Mapping[str, str], inject_hosts_env: bool) -> PodPatch:
    """The ConfigMap mounted at /etc/volcano (every key a file there) and, with ``--inject-hosts-env``
    (Volcano's default), its HOSTS/NUM keys as env vars of every container."""
    env = {key: value for key, value in data.items() if key.startswith("VC_")} if inject_hosts_env else {}
    return PodPatch(env=env, files={f"{SVC_MOUNT}/{key}": value for key, value in data.items()})
