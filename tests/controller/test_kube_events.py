"""The Event correlator: client-go's dedup (same reason, same object, within the window: count
+ 1 on the existing Event) and its per-object spam filter, on an injected time."""

from __future__ import annotations

from sky_kueue.controller.actuators import WorkloadRef
from sky_kueue.controller.kube_events import (
    DEDUP_WINDOW_SECONDS,
    SPAM_BURST,
    SPAM_REFILL_SECONDS,
    Action,
    EventCorrelator,
    EventReason,
    EventRequest,
    event_body,
)

WORKLOAD = WorkloadRef("team-b", "dev-1", "uid-1", "v1beta2")


def _request(reason: EventReason = EventReason.AGED, target: WorkloadRef = WORKLOAD) -> EventRequest:
    return EventRequest(target, reason, "sky-kueue set priority 200")


def test_same_reason_on_the_same_object_is_counted_not_created_again() -> None:
    correlator = EventCorrelator()
    first = correlator.correlate(_request(), 0.0)
    assert first.action is Action.CREATE
    correlator.recorded(_request(), "dev-1.1", 1, 0.0, 0.0)
    again = correlator.correlate(_request(), 10.0)
    assert (again.action, again.count, again.name) == (Action.PATCH, 2, "dev-1.1")
    correlator.recorded(_request(), "dev-1.1", 2, 0.0, 10.0)
    # another reason, or the same name with another UID (a relaunch), is another Event
    assert correlator.correlate(_request(EventReason.BURST_DECIDED), 11.0).action is Action.CREATE
    assert correlator.correlate(_request(target=WorkloadRef("team-b", "dev-1", "uid-2")), 11.0).action is Action.CREATE
    # the window runs from the last occurrence
    assert correlator.correlate(_request(), 10.0 + DEDUP_WINDOW_SECONDS).action is Action.PATCH
    assert correlator.correlate(_request(), 10.0 + DEDUP_WINDOW_SECONDS + 1).action is Action.CREATE


def test_an_object_gets_a_burst_then_one_event_per_refill() -> None:
    correlator = EventCorrelator()
    actions = [correlator.correlate(_request(), 0.0).action for _ in range(SPAM_BURST + 1)]
    assert actions.count(Action.DROP) == 1 and actions[-1] is Action.DROP
    assert correlator.correlate(_request(), SPAM_REFILL_SECONDS - 1).action is Action.DROP
    assert correlator.correlate(_request(), SPAM_REFILL_SECONDS).action is Action.CREATE


def test_the_event_names_the_workload_as_kubectl_describe_looks_it_up() -> None:
    body = event_body(_request(), "dev-1.1", 0.0, "replica-a")
    assert body["involvedObject"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "name": "dev-1",
        "namespace": "team-b",
        "uid": "uid-1",
    }
    assert body["metadata"] == {"name": "dev-1.1", "namespace": "team-b"}
    assert (body["type"], body["reason"], body["count"]) == ("Normal", "Aged", 1)
    assert body["firstTimestamp"] == body["lastTimestamp"] == "1970-01-01T00:00:00Z"
