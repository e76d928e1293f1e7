"""The apiserver: the Kubernetes API for HyperJob's kinds, so that ``kubectl`` and the Kubernetes
client libraries work against HyperJob (docs/kubernetes-api.md).

Writes become the contract's requests on NATS and are answered once the splitter accepted or
refused them; reads come from what the services publish and store (``hyperjob.client.views``).
It is a NATS user that may publish the requests a person may (``events.access``'s ``apiserver``
grant) and decides for each caller, by bearer token, whether NATS would let that caller publish
the request (``identity``).
"""
