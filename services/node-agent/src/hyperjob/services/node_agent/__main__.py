from hyperjob.servicekit.process import run_service

from .app import agent_name, build
from .config import Settings

run_service("node-agent", Settings, build, instance=agent_name)
