"""Real SkyPilot 0.14.1 carries the declared run time to the pod: the in-process policy takes the
label off ``resources.labels`` and SkyPilot's own pod-config merge puts the annotations on the
head pod (``combine_pod_config_fields_and_metadata``, ``check_pod_config``)."""

from __future__ import annotations

from tests.skypilot.builders import CONTEXT
from tests.skypilot.conftest import SkyEnv
from tests.skypilot.test_skypilot_apply import apply, load_task
from tests.skypilot.test_skypilot_render import RENDERED_HEAD

TASK = {
    "name": "train",
    "resources": {
        "infra": f"kubernetes/{CONTEXT}",
        "cpus": "2",
        "labels": {"sky-kueue.io/team": "team-a", "sky-kueue.io/expected-runtime": "90m"},
    },
    "run": "echo hi",
}


def test_skypilot_renders_the_run_time_annotations_on_the_pod(sky_env: SkyEnv) -> None:
    from sky import clouds, skypilot_config
    from sky.provision.kubernetes import utils as kubernetes_utils

    mutated, config = apply(sky_env, load_task(sky_env, TASK))
    (resources,) = [r for r in mutated.resources if isinstance(r.cloud, clouds.Kubernetes)]
    assert "sky-kueue.io/expected-runtime" not in (resources.labels or {})
    with skypilot_config.replace_skypilot_config(config):
        rendered = kubernetes_utils.combine_pod_config_fields_and_metadata(
            RENDERED_HEAD,
            cluster_config_overrides=resources.cluster_config_overrides,
            cloud=resources.cloud,
            context=CONTEXT,
        )
    pod = rendered["available_node_types"]["ray_head_default"]["node_config"]
    assert kubernetes_utils.check_pod_config(pod) == (True, None)
    annotations = pod["metadata"]["annotations"]
    assert annotations["sky-kueue.io/expected-runtime-seconds"] == "5400"
    assert annotations["sky-kueue.io/expected-runtime-source"] == "declared"
