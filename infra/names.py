"""Name rules of GCP and Kubernetes objects, checked before anything is declared."""

from __future__ import annotations

import re

# RFC 1035 label: GCE resources, GKE clusters and node pools, Artifact Registry repositories.
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# RFC 1123 label: Kubernetes namespaces and service accounts may start with a digit.
K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Service account ids: 6-30 characters.
ACCOUNT_ID = re.compile(r"^[a-z]([-a-z0-9]{4,28}[a-z0-9])$")
REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")
LOCATION = re.compile(r"^[a-z]+-[a-z]+\d+(-[a-z])?$")  # a region or a zone
