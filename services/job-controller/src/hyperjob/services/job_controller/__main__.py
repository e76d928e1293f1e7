from hyperjob.servicekit.process import run_service

from .app import build
from .config import Settings

run_service("job-controller", Settings, build)
