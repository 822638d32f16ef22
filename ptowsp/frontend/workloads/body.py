"""`Body`: the check of one workload body or one schedule, composed of one mixin per concept.

Each mixin holds the methods of one concept and calls the others through `self`; all of them
share the state of `BodyState` (state.py). The statement dispatch (`stmt_<Class>`) and the
combinator dispatch (`comb_<name>`) find their methods across the mixins.
"""

from __future__ import annotations

from .axes import AxisChecks
from .calls import CallChecks
from .collectives import CollectiveChecks
from .csp import CspChecks
from .edges import EdgeChecks
from .inline import InlineChecks
from .lets import LetChecks
from .scalars import ScalarChecks
from .schedules import ScheduleChecks
from .state import BodyState
from .statements import StatementChecks
from .views import ViewChecks


class Body(
    StatementChecks,
    LetChecks,
    CspChecks,
    EdgeChecks,
    AxisChecks,
    InlineChecks,
    CallChecks,
    CollectiveChecks,
    ViewChecks,
    ScalarChecks,
    ScheduleChecks,
    BodyState,
):
    """Checks one workload body (`run`) or one schedule (`schedule`, with `decl` None)."""
