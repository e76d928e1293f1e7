"""HyperJob: a multi-cluster meta-scheduler for large AI and HPC batch jobs, with Volcano's semantics.

One namespace, laid out by role:

- contracts: ``api`` (manifests, validation), ``events`` (messages, subjects, streams),
  ``records`` (the documents each service keeps);
- pure cores: ``schedcore`` (Volcano's scheduler), ``jobcore`` (Volcano's Job lifecycle),
  ``fleetcore`` (splitting, global placement, the cross-cluster gang, status), ``hwprobe``
  (GPU and fabric readings → node health);
- infrastructure: ``bus`` (NATS JetStream, or in process), ``store`` (Redis, or in process),
  ``servicekit`` (the runtime every service runs on), ``telemetry``, ``testkit``;
- ``services.<name>``: the six services (``python -m hyperjob.services.<name>``);
- ``simulator``: ``hyperjob simulate``, the services themselves in virtual time;
- ``cli``: the ``hyperjob`` command.
"""
