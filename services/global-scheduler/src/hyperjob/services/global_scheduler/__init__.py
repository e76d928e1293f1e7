"""global-scheduler: where each child job runs.

Owns ``placement`` documents. A child asks to be placed (``PlaceChild``) on one of its eligible
clusters; it is dispatched to the job-controller of a live cluster where its whole gang fits now
(``fleetcore.place_job``), and otherwise waits, with the reason, until a cluster has room.
Removing a child goes through here too, so a child that never left the waiting line is simply
forgotten and one that runs is removed from its cluster (even one that is down: the command
waits in its stream until the cluster returns).
"""
