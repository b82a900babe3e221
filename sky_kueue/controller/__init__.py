"""The resubmission controller: Kueue preempts a SkyPilot job, the relaunch comes back aged.

Why it exists: a SkyPilot relaunch is a new Workload, at the back of its priority band, and
Kueue has no aging across priority levels (kueue#754); KEP-7990's ``priority-boost`` leaves
"boost a workload preempted too many times" to an external controller. This is it.

One concept per module; pure core, adapters, entry points (dependencies point inward):

* pure: :mod:`.detection` (what a Workload snapshot means), :mod:`.identity` (whose job),
  :mod:`.keys` (idempotency keys), :mod:`.history` (the per-job record and the store port),
  :mod:`.aging` (the policies), :mod:`.actuators` (patch builders), :mod:`.burst`,
  :mod:`.relaunch` (the relaunch race), :mod:`.engine` (one reconcile), :mod:`.clock`,
  :mod:`.kueue_api` (Kueue's names).
* adapters: :mod:`.sqlite_store` (durable history), :mod:`.runtime_state` (watch cursor,
  heartbeat), :mod:`.cursor` (the durable Workload cursor), :mod:`.kube_actuator` (merge
  patches, UID-guarded deletes), :mod:`.leader` (Lease election), :mod:`.gate_detection`
  (PriorityBoost gate), :mod:`.config_file` (``sky-kueue.yaml``), :mod:`.logs` (JSON lines).
  Kubernetes is read through :mod:`sky_kueue.mirror` only (one reflector, one cache).
* the running controller, split as client-go/controller-runtime split theirs: the cache is a
  :class:`sky_kueue.mirror.Mirror` resumed from the cursor, :mod:`.work_queue` (typed
  items), :mod:`.reconciler` (one item), :mod:`.session` (one leadership term),
  :mod:`.manager` (election, sessions, heartbeat: ``sky-kueue controller run``),
  :mod:`.events` (observers, log, users' hooks); and :mod:`.skypilot_plugin` (the
  ``KUEUE_AGING`` recovery strategy inside SkyPilot).
"""
