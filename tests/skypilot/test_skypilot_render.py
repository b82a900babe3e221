"""What SkyPilot itself makes of a labeled task: the namespace, LocalQueue and pod labels its
Kubernetes cloud resolves, and its own ``pod_config`` validation.

Why: the policy's output is only useful if SkyPilot 0.14.1 accepts it on the way to a pod. These
tests call the functions SkyPilot's launch path calls (``sky/clouds/kubernetes.py``
``make_deploy_resources_variables`` → ``kubernetes_utils.get_namespace`` and
``skypilot_config.get_effective_queue_name``; ``sky/backends/backend_utils.py``
``write_cluster_config`` → ``combine_pod_config_fields_and_metadata`` and
``check_pod_config``), under the config the policy returned, for every template. With a
``kubernetes`` client SkyPilot does not support (>=36), ``check_pod_config`` rejects every
``metadata.labels``; this is the test that catches it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.skypilot.builders import CONTEXT
from tests.skypilot.conftest import SkyEnv
from tests.skypilot.test_skypilot_apply import EXPECTED, apply, load_task

#: The pod SkyPilot's template renders for the head node, reduced to what the merge touches
#: (``sky/templates/kubernetes-ray.yml.j2``: ``available_node_types.ray_head_default``).
RENDERED_HEAD: dict[str, Any] = {
    "provider": {
        "autoscaler_service_account": {"metadata": {}},
        "autoscaler_role": {"metadata": {}},
        "autoscaler_role_binding": {"metadata": {}},
        "services": [],
    },
    "available_node_types": {
        "ray_head_default": {
            "node_config": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"labels": {"skypilot-head-node": "1"}},
                "spec": {"containers": [{"name": "ray-node", "image": "skypilot:runtime"}]},
            }
        }
    },
}


@pytest.mark.parametrize("template", sorted(EXPECTED))
def test_skypilot_resolves_and_validates_what_the_policy_writes(sky_env: SkyEnv, template: str) -> None:
    from sky import clouds, skypilot_config
    from sky.provision.kubernetes import utils as kubernetes_utils

    team, queue, priority_class, _, _ = EXPECTED[template]
    mutated, config = apply(sky_env, load_task(sky_env, template))
    k8s = [r for r in mutated.resources if isinstance(r.cloud, clouds.Kubernetes)]
    assert k8s, "every template has a Kubernetes candidate"
    with skypilot_config.replace_skypilot_config(config):
        for resources in k8s:
            overrides = resources.cluster_config_overrides
            namespace = kubernetes_utils.get_namespace(context=CONTEXT, override_configs=overrides)
            local_queue = skypilot_config.get_effective_queue_name(
                cloud="kubernetes", region=CONTEXT, override_configs=overrides
            )
            rendered = kubernetes_utils.combine_pod_config_fields_and_metadata(
                RENDERED_HEAD, cluster_config_overrides=overrides, cloud=resources.cloud, context=CONTEXT
            )
            pod = rendered["available_node_types"]["ray_head_default"]["node_config"]
            valid, message = kubernetes_utils.check_pod_config(pod)

            assert (valid, message) == (True, None)
            assert namespace == team
            assert local_queue == queue
            pod_labels = pod["metadata"]["labels"]
            assert pod_labels["kueue.x-k8s.io/queue-name"] == queue
            assert pod_labels["kueue.x-k8s.io/priority-class"] == priority_class
            assert pod_labels["skypilot-head-node"] == "1"  # merged into, not replaced


def test_check_pod_config_accepts_labels_with_the_installed_client(sky_env: SkyEnv) -> None:
    """The regression itself: kubernetes>=36 made this return a ``Dict[str, str]`` import error."""
    from sky.provision.kubernetes import utils as kubernetes_utils

    assert kubernetes_utils.check_pod_config({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}}}) == (
        True,
        None,
    )
    valid, message = kubernetes_utils.check_pod_config({"metadata": {"labels": "not-a-map"}})
    assert not valid and message
