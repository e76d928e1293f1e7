"""status-aggregator: the one status of every HyperJob.

Owns ``hjstatus`` documents. Every child's phase change (and every placement wait) is folded with
``fleetcore.aggregate_status`` into upstream's status shape plus the phase, the per-cluster
placement and the reason a HyperJob waits; a change is announced on ``hj.hyperjob.status``. The
CLI reads these documents. News of a HyperJob whose spec has not come yet (``hjearly``: after a
restart the two travel on different consumers) is kept and folded in when the spec comes.
"""
