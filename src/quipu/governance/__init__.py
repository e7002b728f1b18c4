"""The governance use cases every surface calls (LIFE-4..8, SCOPE-6, SCOPE-8, SAFE-4): erase and
subject erasure under legal holds, the review queue of model output and quarantine, judgement,
restore and merge, snapshots, the project registry, operator oversight and the audit log.

Beside :mod:`quipu.memories`, over the same store and the same :class:`~quipu.guard.Guard`
(authorisation, screening, audit). Who may do what:

- erase and subject erasure: an admin, or a key with the ``memory:erase`` grant, tenant-wide;
- legal holds and the audit log: admins; oversight and the subject list: superadmins;
- reviews and judgements: a reviewer (an admin or the ``memory:review`` grant), tenant-wide,
  never on a version its own key wrote;
- restore and merge: the scope owner, as a revision; snapshots: any caller, each member
  re-checked against the caller on every resolve; projects: admins or ``tenant:write``.

Every act is audited with the principal's role, agent and user.
"""

from __future__ import annotations

from quipu.governance.base import (
    ERASE_SUBJECT,
    FAMILY_BATCH,
    SUBJECT_STAGES,
    TURN_BATCH,
    Progress,
)
from quipu.governance.erasure import Erased, Erasing
from quipu.governance.oversight import Overseeing
from quipu.governance.pins import Pinning, Resolved
from quipu.governance.review import Reviewing

__all__ = [
    "ERASE_SUBJECT",
    "FAMILY_BATCH",
    "SUBJECT_STAGES",
    "TURN_BATCH",
    "Erased",
    "GovernanceService",
    "Progress",
    "Resolved",
]


class GovernanceService(Erasing, Reviewing, Pinning, Overseeing):
    """The governance plane's use cases over the memory service's store and guard (see the
    module docstring); one module per concern: :mod:`.erasure`, :mod:`.review`,
    :mod:`.pins`, :mod:`.oversight`."""
