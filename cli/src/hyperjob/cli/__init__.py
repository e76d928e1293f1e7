"""The ``hyperjob`` command: run the system (``up``), talk to it (``apply``, ``get``, ``watch`` ...),
and the offline tools (``simulate``, ``bench``)."""
