"""The read-only web dashboard: HyperJobs, a HyperJob's children, pods and timeline, queues,
clusters and nodes, updated live (server-sent events), in the spirit of Armada's Lookout.

A Starlette application served by uvicorn on 127.0.0.1 (``hyperjob up`` starts it as one more
supervised process, ``python -m hyperjob.dashboard``; compose runs it as a service). It reads the
system exactly as ``hyperjob get`` does (``hyperjob.cli.views`` over ``hyperjob.client``) and
writes nothing: there is no route that changes state.

Routes: ``/`` (the page; client-side routes ``#/``, ``#/hyperjobs/NAME``, ``#/queues``,
``#/clusters``), ``/api/snapshot`` (every list, JSON), ``/api/hyperjobs/{name}`` (one HyperJob with
its child jobs and pods, JSON), ``/api/events`` (``text/event-stream``: the snapshot each time it
changes), ``/healthz``, ``/metrics`` (the fleet's queues, clusters and nodes for Prometheus:
``dashboard.metrics``).
"""

from .app import create_app

__all__ = ["create_app"]
