"""`pto_wsp.auto_schedule`: the prototype's schedule explorer, as wspc's
(`ptowsp.embed.auto_schedule`): configurations are compared on the cycle model, not timed.
`from pto_wsp import auto_schedule` is the function, `from pto_wsp.auto_schedule import ...`
reads this module (as for `kernel`)."""

from ptowsp.embed.auto_schedule import (
    AutoScheduler,
    DispatchOption,
    ExplorationResult,
    ExplorationSummary,
    ScheduleConfig,
    SearchSpace,
    TimingOption,
    auto_schedule,
)

__all__ = ["DispatchOption", "TimingOption", "ScheduleConfig", "ExplorationResult",
           "ExplorationSummary", "SearchSpace", "AutoScheduler", "auto_schedule"]
