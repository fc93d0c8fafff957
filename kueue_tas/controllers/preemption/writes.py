"""A preemption's writes: each victim's check entry turned Retry (Kueue then evicts and
requeues it), guarded by the version the preemption was decided on, and the Events on the
victims and the preemptor. A victim that changed since (finished, evicted by Kueue itself) is
read again and told to go only if it still runs on our Ready entry."""

from __future__ import annotations

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import workload_key
from kueue_tas.controllers.check_entry_writes import check_entry
from kueue_tas.controllers.decide import Decision, Outcome
from kueue_tas.controllers.decision_context import DecisionContext
from kueue_tas.controllers.preemption.preemptor import PreemptionStep
from kueue_tas.controllers.workload_events import workload_event
from kueue_tas.kube.errors import Conflict

__all__ = ["PREEMPTED_REASON", "PREEMPTING_REASON", "carry_out"]

log = structlog.get_logger(__name__)

PREEMPTED_REASON = "TopologyPreempted"
PREEMPTING_REASON = "TopologyPreemption"


def _ready_entry(ctx: DecisionContext, wl: Workload) -> str | None:
    """Our check whose Ready entry keeps ``wl`` admitted (None: nothing of ours to withdraw)."""
    if wl.is_finished or wl.is_evicted or not wl.has_quota_reservation:
        return None
    ours = ctx.checks.names()
    return next(
        (st.name for st in wl.status.admission_checks if st.name in ours and st.state == c.CHECK_STATE_READY), None
    )


async def _evict(ctx: DecisionContext, victim: Workload, message: str) -> bool:
    """Turn the victim's entry Retry; False when it no longer runs on ours (or the write failed)."""
    for attempt in range(2):
        check = _ready_entry(ctx, victim)
        if check is None:
            return False
        try:
            await ctx.writer.write_check(victim, check_entry(check, Decision(Outcome.RETRY, message), victim))
            return True
        except Conflict:
            if attempt:
                break
            fresh = await ctx.writer.read_workload(victim)
            if fresh is None:
                return False
            victim = fresh
        except Exception as exc:
            log.warning("preemption_victim_write_failed", workload=workload_key(victim), error=str(exc))
            return False
    return False


async def carry_out(ctx: DecisionContext, step: PreemptionStep) -> None:
    """Evict the victims (unless a dry run) and say so on each and on the preemptor."""
    preemptor = step.preemptor
    where = step.hold.domain.named()
    names = ", ".join(f"{v.namespace}/{v.name}" for v in step.victims)
    if step.dry_run:
        await workload_event(
            ctx.events,
            preemptor,
            "Normal",
            PREEMPTING_REASON,
            f"topology preemption (DryRun): would evict {len(step.victims)} workload(s) from {where}: {names}",
        )
        return
    message = step.victim_message()
    evicted = []
    for victim in step.victims:
        if await _evict(ctx, victim, message):
            evicted.append(victim)
            await workload_event(ctx.events, victim, "Warning", PREEMPTED_REASON, message)
    log.info(
        "topology_preemption_evicting",
        workload=workload_key(preemptor),
        evicted=[workload_key(v) for v in evicted],
        skipped=[workload_key(v) for v in step.victims if v not in evicted],
    )
    await workload_event(
        ctx.events,
        preemptor,
        "Normal",
        PREEMPTING_REASON,
        f"preempting {len(evicted)} workload(s) of lower priority to clear {where}: "
        + ", ".join(f"{v.namespace}/{v.name}" for v in evicted),
    )
