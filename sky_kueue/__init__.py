"""sky-kueue: SkyPilot on Kueue-managed Kubernetes clusters.

Subpackages, one per concept (dependencies point inward only):

* ``kueue``      - pure model of Kueue objects and of its scheduling cycle (no I/O).
* ``mirror``     - watch-based local mirror of a cluster's Kueue objects (kubernetes client).
* ``controller`` - preemption detection and resubmission with priority aging.
* ``skypilot``   - SkyPilot admin policy, policy server and plugin configuration.
* ``sim``        - trace-driven discrete-event simulation over the model.
* ``sandbox``    - a local API server with Kueue behaviour, for tests and demos.
* ``cli``        - the ``sky-kueue`` command.
"""

from __future__ import annotations

__version__ = "0.1.0"
