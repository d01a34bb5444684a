"""Scheduled jobs (issue 18): the schedule core, the ``/scheduler`` actor, runs and delivery."""

from ._actor import SCHEDULER_PATH as SCHEDULER_PATH
from ._actor import GetSchedulerStatus as GetSchedulerStatus
from ._actor import Scheduler as Scheduler
from ._actor import SchedulerInbox as SchedulerInbox
from ._actor import SchedulerOptions as SchedulerOptions
from ._delivery import CronDelivered as CronDelivered
from ._delivery import Senders as Senders
from ._due import Decision as Decision
from ._due import decide as decide
from ._jobs import JobError as JobError
from ._schedule import ScheduleError as ScheduleError
from ._schedule import next_after as next_after
from ._schedule import parse_schedule as parse_schedule
from ._spec import scheduler_spec as scheduler_spec

__all__ = [
    "SCHEDULER_PATH",
    "CronDelivered",
    "Decision",
    "GetSchedulerStatus",
    "JobError",
    "ScheduleError",
    "Scheduler",
    "SchedulerInbox",
    "SchedulerOptions",
    "Senders",
    "decide",
    "next_after",
    "parse_schedule",
    "scheduler_spec",
]
