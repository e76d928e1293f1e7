"""splitter: the API front door and the owner of every HyperJob's spec and split.

Owns ``hyperjob``, ``queue`` and ``priorityclass`` documents. It validates each applied manifest
(structure in ``api``, references to clusters and queues against the system), answers the client
on ``hj.result.<request>``, splits a HyperJob into child Volcano Jobs with ``fleetcore`` (a plain
Job is a HyperJob of one child), and asks the global-scheduler to place each child. A rejected
manifest changes nothing. Deleting finishes only when every child is gone from every cluster.
"""
