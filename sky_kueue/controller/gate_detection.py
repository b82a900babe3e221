"""Does the cluster's Kueue run the ``PriorityBoost`` feature gate? (the I/O edge)

Why it matters: with the alpha gate on, Kueue adds the ``kueue.x-k8s.io/priority-boost``
annotation to a Workload's priority (KEP-7990); with it off, Kueue ignores the annotation
and the controller must patch ``spec.priority`` instead (KEP-7990 ``keps/7990-preemption-cost`` and Kueue's
``PriorityBoost`` gate in ``pkg/features``). The
``actuator: auto`` setting resolves to one or the other with what this module finds.

Where the gate can be set, checked in order:

1. the ``--feature-gates`` argument of the manager Deployment
   (``kueue-system/kueue-controller-manager``), parsed by
   :func:`~sky_kueue.controller.actuators.feature_gate_from_deployment`;
2. the ``featureGates`` map of Kueue's configuration file, shipped in the ConfigMap
   ``kueue-system/kueue-manager-config`` under ``controller_manager_config.yaml``.

Anything unreadable (not found, forbidden, unreachable) counts as "not mentioned": the gate
is alpha and off by default, so ``auto`` then patches ``spec.priority``, which Kueue honours
either way. The operator can always force the answer (``controller run
--priority-boost-gate on|off``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from sky_kueue.controller.actuators import feature_gate_from_deployment
from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror import rest

log = logging.getLogger(__name__)

KUEUE_NAMESPACE = "kueue-system"
KUEUE_DEPLOYMENT = "kueue-controller-manager"
KUEUE_CONFIG_MAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
#: (connect, read) timeout of the detection reads.
DETECTION_REQUEST_TIMEOUT_SECONDS = (5, 10)


@dataclass(frozen=True)
class GateReading:
    """The gate's state (None: not mentioned anywhere readable) and where it was read."""

    enabled: bool | None
    source: str


def feature_gate_from_kueue_config(text: str, gate: str = kueue_api.PRIORITY_BOOST_FEATURE_GATE) -> bool | None:
    """Reads ``featureGates.<gate>`` from Kueue's configuration file; None if absent or unreadable."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    gates = document.get("featureGates") if isinstance(document, Mapping) else None
    value = gates.get(gate) if isinstance(gates, Mapping) else None
    return value if isinstance(value, bool) else None


def _read_json(api_client: client.ApiClient, path: str) -> dict[str, Any] | None:
    try:
        response = rest.request(api_client, "GET", path, timeout=DETECTION_REQUEST_TIMEOUT_SECONDS)
    except ApiException as err:
        log.debug("gate detection: %s -> HTTP %s", path, err.status)
        return None
    except HTTPError as err:
        log.debug("gate detection: %s -> %s", path, err)
        return None
    try:
        document = json.loads(response.data)
    except ValueError:
        return None
    finally:
        response.release_conn()
    return document if isinstance(document, dict) else None


def detect_priority_boost_gate(api_client: client.ApiClient, namespace: str = KUEUE_NAMESPACE) -> GateReading:
    """Finds the ``PriorityBoost`` gate's state in the cluster (never raises)."""
    deployment = _read_json(api_client, f"/apis/apps/v1/namespaces/{namespace}/deployments/{KUEUE_DEPLOYMENT}")
    if deployment is not None:
        value = feature_gate_from_deployment(deployment)
        if value is not None:
            return GateReading(value, f"Deployment {namespace}/{KUEUE_DEPLOYMENT} --feature-gates")
    config_map = _read_json(api_client, f"/api/v1/namespaces/{namespace}/configmaps/{KUEUE_CONFIG_MAP}")
    if config_map is not None:
        text = (config_map.get("data") or {}).get(KUEUE_CONFIG_KEY)
        if isinstance(text, str):
            value = feature_gate_from_kueue_config(text)
            if value is not None:
                return GateReading(value, f"ConfigMap {namespace}/{KUEUE_CONFIG_MAP} featureGates")
    return GateReading(None, "not set in the Kueue Deployment or its configuration (alpha, off by default)")
