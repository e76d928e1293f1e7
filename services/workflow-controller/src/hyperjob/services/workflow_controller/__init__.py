"""workflow-controller: Volcano's CronJob and JobFlow/JobTemplate controllers.

Owns ``cronjob``, ``jobflow`` and ``jobtemplate`` documents (``records``). It answers the applies
and deletes of these kinds (the splitter leaves them to it) and makes plain Volcano Jobs the way a
user would: an ``ApplyManifest`` to the splitter, and a ``DeleteObject`` to remove one. A CronJob
makes its jobs on schedule (``jobcore.cronjob``: concurrencyPolicy, startingDeadlineSeconds,
history limits, suspend) with a timer at each next schedule time; a JobFlow makes the job of each
flow once the jobs it ``dependsOn`` are Completed (``jobcore.jobflow``), from the JobTemplate of
the flow's name. It follows the jobs it made through the job-controllers' phase reports
(``job.phase.*``), their end (``hj.hyperjob.deleted``) and the splitter's answers
(``hj.result.*``: a refused job is recorded on its owner and not asked for again).

Deleting a CronJob or a JobFlow deletes the jobs it made (Kubernetes' background cascade through
ownerReferences). One instance for the fleet.
"""
