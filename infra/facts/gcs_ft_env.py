"""The environment of Ray GCS fault tolerance, in one place for the stack's RayCluster
(``components.ray_gcs_ft``) and the simulated cluster (``workloads.gcs_redis``): what KubeRay
1.7.0 sets on the pods from ``gcsFaultToleranceOptions`` (``common/pod.go
configureGCSFaultTolerance``) and what Ray 2.60 reads besides."""

from __future__ import annotations

REDIS_ADDRESS_ENV = "RAY_REDIS_ADDRESS"
REDIS_PASSWORD_ENV = "REDIS_PASSWORD"
REDIS_USERNAME_ENV = "REDIS_USERNAME"
STORAGE_NAMESPACE_ENV = "RAY_external_storage_namespace"
"""KubeRay sets it to the RayCluster's UID, so one Redis can hold many clusters."""

KUBERAY_HEAD_ENV = (REDIS_ADDRESS_ENV, REDIS_PASSWORD_ENV, REDIS_USERNAME_ENV,
                    STORAGE_NAMESPACE_ENV)
"""The head environment KubeRay sets from gcsFaultToleranceOptions and refuses to find set
by hand (``utils/validation.go ValidateRayClusterSpec``)."""

FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"
"""The head pod annotation KubeRay 1.7.0 sets to whether GCS fault tolerance is on
(``utils/constant.go RayFTEnabledAnnotationKey``)."""
GCS_FT_MIN_KUBERAY = "1.3.0"
"""The first KubeRay whose RayCluster CRD has ``gcsFaultToleranceOptions``
(``apis/ray/v1/raycluster_types.go``, kuberay #2715); an older CRD prunes it silently."""

RECONNECT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"
"""How long a worker's raylet waits for a new head before it exits."""
KUBERAY_RECONNECT_TIMEOUT_S = 600
"""What KubeRay sets ``RECONNECT_ENV`` to on workers unless the template sets it."""

CA_ENV = "RAY_REDIS_CA_CERT"
"""The CA file Ray 2.60's GCS verifies a ``rediss://`` server with (its ``ray_config``);
KubeRay does not set it."""
