"""An operator reads one memory of the tenant, whoever owns it: every version, for the console's
memory page (OPS-4). Admins and superadmins only; every read is audited (SAFE-4) like an
oversight list, and a missing or foreign id is the one 404 (SCOPE-7)."""

from __future__ import annotations

from quipu.core import validate
from quipu.core.records import MemoryVersion, Principal, ScopeRef
from quipu.governance.base import need_admin
from quipu.guard import not_found
from quipu.memories import MemoryService


class Inspection:
    """Tenant-wide reads of one memory family for operators."""

    def __init__(self, memory: MemoryService) -> None:
        self.store = memory.store
        self.guard = memory.guard

    def history(
        self, principal: Principal, memory_id: object
    ) -> tuple[ScopeRef, list[MemoryVersion]]:
        """The partition and every version (oldest first) of a memory of the principal's
        tenant; audited as ``memory.inspect``."""
        need_admin(principal)
        ident = validate.identifier(memory_id, field="id")
        ref = self.store.locate(principal.tenant_id, ident)
        if ref is None:
            raise not_found(ident)
        versions = self.store.history(ref, ident)
        if not versions:
            raise not_found(ident)
        self.guard.audit(
            principal,
            "memory.inspect",
            (ident,),
            details={"scope": ref.scope.value, "owner": ref.owner},
        )
        return ref, versions
