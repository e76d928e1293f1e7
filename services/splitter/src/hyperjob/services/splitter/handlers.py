"""The splitter: the API front door, and the owner of every HyperJob's spec, plan and lifecycle.

An applied object is validated (structure in ``api``; what it refers to against the splitter's
own configuration and the clusters it hears of) and answered on ``hj.result.<request>``; a
rejected one changes nothing. Queues and priority classes go out on the configuration stream.
A HyperJob (or plain Job) is submitted for admission; once admitted it is split and its
children are asked to be placed. The splitter follows each child's phase (the child-failure
policy, the lifecycle, failover when a cluster is lost) and finishes a deletion only when every
child is gone from every cluster.

``Splitter`` composes the units that do this, each in its own module with its invariants stated
where they are enforced; ``app.build`` routes each message to the unit that handles it.
"""

from __future__ import annotations

from hyperjob.servicekit import Runtime

from .admission import Admission
from .announce import SpecAnnouncer
from .commands import Commands
from .config import Settings
from .deletion import Deletion
from .failover import Replanning
from .planning import Planner
from .room import Room
from .state import SplitterState


class Splitter:
    """The splitter's units over one shared state (``SplitterState``):

    - ``admission``: applied objects validated, answered, and owners submitted to their queue;
    - ``planner``: an admitted HyperJob split into children and placed, again on a gang retry or
      a child's failure;
    - ``room``: the room children sent lately take until their clusters' summaries count them;
    - ``replanning``: what the clusters say, and the round that re-plans and fails over;
    - ``commands`` and ``deletion``: what is asked of objects already kept;
    - ``announcer``: each changed HyperJob's spec, sent with the commit that changed it.
    """

    def __init__(self, runtime: Runtime, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.state = state = SplitterState(runtime)
        self.room = Room(state)
        self.planner = Planner(state, self.room)
        self.admission = Admission(state, self.planner)
        self.replanning = Replanning(state, self.room, self.planner, self.admission, settings)
        self.commands = Commands(state, self.planner)
        self.deletion = Deletion(state)
        self.announcer = SpecAnnouncer(state)
