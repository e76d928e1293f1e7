"""Job plugins env, svc, ssh and pytorch as pure functions of (job record, pod) → env and files.

Volcano's plugins mutate the pod (env vars, a ConfigMap or Secret mounted as files). Here each
plugin returns what the pod would see: ``env`` (name → value, ConfigMap references resolved) and
``files`` (absolute path → content). Hostnames are ``<job>-<task>-<i>`` unless the task template
sets ``hostname`` (then that single host); the subdomain is the job name unless the template sets one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import api

from .model import JobRecord

Env = dict[str, str]
Files = dict[str, str]
SVC_MOUNT = "/etc/volcano"
SSH_MOUNT = "/root/.ssh"
PYTORCH_PORT = 23456


def pod_environment(record: JobRecord, pod_name: str, extra_env: Mapping[str, str] | None = None) -> tuple[Env, Files]:
    """Env and files the job's plugins give pod ``pod_name``; ``extra_env`` (then the record's) wins.

    Pure and deterministic: the same record and pod always give the same result. Raises
    ``KeyError`` for a name that is not ``<job>-<task>-<index>`` of this job.
    """
    task, index = parse_pod_name(record, pod_name)
    env: Env = {}
    files: Files = {}
    for name in sorted(record.spec.plugins):  # fixed order, unlike Go's map iteration
        plugin = _PLUGINS.get(name)
        if plugin is not None:
            plugin_env, plugin_files = plugin(record, task, index, record.spec.plugins[name])
            env.update(plugin_env)
            files.update(plugin_files)
    env.update(record.extra_env)
    env.update(extra_env or {})
    return env, files


def parse_pod_name(record: JobRecord, pod_name: str) -> tuple[api.TaskSpec, int]:
    """The task and index of ``<job>-<task>-<index>``; task names may contain ``-``."""
    for task in record.spec.tasks:
        prefix = f"{record.name}-{task.name}-"
        rest = pod_name[len(prefix):]
        if pod_name.startswith(prefix) and rest.isdigit() and int(rest) < task.replicas:
            return task, int(rest)
    raise KeyError(f"{pod_name!r} is not a pod of job {record.name!r}")


def pod_name(job: str, task: str, index: int) -> str:
    return f"{job}-{task}-{index}"


def task_hosts(record: JobRecord, task: api.TaskSpec) -> list[str]:
    """``<host>.<subdomain>`` of every replica, or only the template's hostname when it sets one."""
    spec = task.template.spec
    subdomain = spec.subdomain or record.name
    if spec.hostname:
        return [f"{spec.hostname}.{subdomain}"]
    return [f"{pod_name(record.name, task.name, i)}.{subdomain}" for i in range(task.replicas)]


def env_key(task_name: str) -> str:
    """Volcano's env spelling of a task name: ``-`` → ``_``, then upper case."""
    return task_name.replace("-", "_").upper()


# ---------------------------------------------------------------------------------------- plugins
def env_plugin(record: JobRecord, task: api.TaskSpec, index: int, args: list[str]) -> tuple[Env, Files]:
    return {"VK_TASK_INDEX": str(index), "VC_TASK_INDEX": str(index)}, {}


def svc_data(record: JobRecord) -> dict[str, str]:
    """The ``<job>-svc`` ConfigMap: ``<task>.host`` (newline-joined), ``VC_<TASK>_HOSTS``, ``VC_<TASK>_NUM``."""
    data: dict[str, str] = {}
    for task in record.spec.tasks:
        hosts = task_hosts(record, task)
        data[f"{task.name.replace('-', '_')}.host"] = "\n".join(hosts)
        data[f"VC_{env_key(task.name)}_HOSTS"] = ",".join(hosts)
        data[f"VC_{env_key(task.name)}_NUM"] = str(len(hosts))
    return data


def svc_plugin(record: JobRecord, task: api.TaskSpec, index: int, args: list[str]) -> tuple[Env, Files]:
    # The ConfigMap is mounted at /etc/volcano, so every key is also a file there; with
    # --inject-hosts-env (Volcano's default) the HOSTS/NUM keys are env vars of every container.
    data = svc_data(record)
    env = {key: value for key, value in data.items() if key.startswith("VC_")}
    return env, {f"{SVC_MOUNT}/{key}": value for key, value in data.items()}


def ssh_config(record: JobRecord, port: int = 22) -> str:
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in record.spec.tasks:
        spec = task.template.spec
        names = [spec.hostname] if spec.hostname else [pod_name(record.name, task.name, i) for i in range(task.replicas)]
        for host in names:
            lines += [f"Host {host}", f"  HostName {host}.{spec.subdomain or record.name}", f"  Port {port}"]
    return "\n".join(lines) + "\n"


def ssh_plugin(record: JobRecord, task: api.TaskSpec, index: int, args: list[str]) -> tuple[Env, Files]:
    if record.ssh is None:
        return {}, {}
    flags = _parse_flags(args)
    path = flags.get("ssh-key-file-path", SSH_MOUNT)
    port = int(flags.get("ssh-port", "22"))
    files = {f"{path}/id_rsa": record.ssh.private_key, f"{path}/id_rsa.pub": record.ssh.public_key,
             f"{path}/authorized_keys": record.ssh.public_key, f"{path}/config": ssh_config(record, port)}
    return {}, files


def pytorch_plugin(record: JobRecord, task: api.TaskSpec, index: int, args: list[str]) -> tuple[Env, Files]:
    """MASTER_ADDR/PORT, WORLD_SIZE and RANK (master ranks first, then workers).

    Differs from Volcano on purpose: Volcano gives worker i rank i+1 and every master rank 0,
    which is only right with one master; here a worker's rank is (#masters + i) and master i has
    rank i — identical for the usual single master. ``record.rank`` shifts ranks and overrides
    WORLD_SIZE for a HyperJob child whose world spans clusters.
    """
    flags = _parse_flags(args)
    master_name, worker_name = flags.get("master", "master"), flags.get("worker", "worker")
    port = flags.get("port", str(PYTORCH_PORT))
    tasks = {t.name: t for t in record.spec.tasks}
    master = tasks.get(master_name)
    if master is None:  # Volcano logs and leaves the pod alone
        return {}, {}
    masters = master.replicas
    world = sum(t.replicas for t in record.spec.tasks if t.name in (master_name, worker_name))
    env = {"MASTER_ADDR": task_hosts(record, master)[0], "MASTER_PORT": port,
           "WORLD_SIZE": str(record.rank.world_size if record.rank.world_size is not None else world)}
    if task.name == master_name:
        env["RANK"] = str(record.rank.rank_offset + index)
    elif task.name == worker_name:
        env["RANK"] = str(record.rank.rank_offset + masters + index)
    return env, {}


def _parse_flags(args: list[str]) -> dict[str, str]:
    """Go ``flag`` style: ``--name=value``, ``-name=value`` or ``--name value``."""
    flags: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i].lstrip("-")
        if "=" in arg:
            key, value = arg.split("=", 1)
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            key, value = arg, args[i + 1]
            i += 1
        else:
            key, value = arg, "true"
        flags[key] = value
        i += 1
    return flags


PluginFn = Callable[[JobRecord, api.TaskSpec, int, list[str]], tuple[Env, Files]]
_PLUGINS: dict[str, PluginFn] = {"env": env_plugin, "svc": svc_plugin, "ssh": ssh_plugin, "pytorch": pytorch_plugin}
