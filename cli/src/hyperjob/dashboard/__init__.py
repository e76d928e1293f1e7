"""The read-only web dashboard: HyperJobs, a HyperJob's children, pods and timeline, queues,
clusters and nodes, updated live (server-sent events), in the spirit of Armada's Lookout.

A Starlette application served by uvicorn on 127.0.0.1 (``hyperjob up`` starts it as one more
supervised process, ``python -m hyperjob.dashboard``; compose runs it as a service). It reads the
system exactly as ``hyperjob get`` does (``hyperjob.client.views``) and
writes nothing: there is no route that changes state.

Routes: ``/`` (the page, ``static/app.js``; client-side routes ``#/?ns=&phase=&queue=&cluster=
&label=&q=&sort=&dir=&page=`` (the HyperJobs: searched, filtered, sorted and paged in the page over
the snapshot, one page of rows drawn), ``#/hyperjobs/NAMESPACE/NAME``, ``#/jobs/NAME``,
``#/queues[/NAME]``, ``#/clusters[/NAME]``, ``#/nodes/NAME``), ``/api/snapshot`` (every list,
JSON), ``/api/hyperjobs/[{namespace}/]{name}`` (one HyperJob with its child jobs and pods, its
Events as ``describe`` shows them, its manifest as YAML, its trace's spans as ``hyperjob trace``
draws them and the end of its pods' logs where pods really run), ``/api/jobs/{name}`` (a Job with
its pods), ``/api/events`` (``text/event-stream``: the snapshot each time it
changes), ``/healthz``, ``/metrics`` (the fleet's queues, clusters and nodes for Prometheus:
``dashboard.metrics``).
"""

from .app import create_app

__all__ = ["create_app"]
