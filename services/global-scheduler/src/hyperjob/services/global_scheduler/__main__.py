from hyperjob.servicekit.process import run_service

from .app import build
from .config import Settings

run_service("global-scheduler", Settings, build)
