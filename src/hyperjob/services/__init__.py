"""The services, each its own process: ``python -m hyperjob.services.<name>``."""
